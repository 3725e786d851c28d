// SPDX-License-Identifier: GPL-2.0
// stallscope's off-CPU recorder: for the threads of the target processes only (filtered in the
// kernel by tgid), every interval a thread spends off a CPU that lasts at least min_ns: when it
// began and ended (CLOCK_MONOTONIC ns), the state it left in, its kernel stack, the thread that
// woke it (with that thread's kernel stack) and, for a preempted thread, who ran instead.
// Uses the classic tracepoints' record layout (checked against tracefs by the loader), so no
// kernel headers or BTF are needed to build it; on_waking reads the woken task's pid through
// CO-RE (the kernel's BTF, at load time). Programs: on_switch_btf (sched_switch as a BTF
// tracepoint, which also runs the watchdog: BPF timers are refused in classic tracepoint
// programs) or, where the kernel lacks it, on_switch (the classic tracepoint, no watchdog);
// on_waking (sched_waking); on_sp_begin and on_sp_end (the JVM's own safepoint probes,
// hs_private:safepoint__begin and __end, USDT in libjvm.so, attached to one JVM on request).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
/* usdt.bpf.h: libbpf's USDT support (its maps are how libbpf attaches a probe), which needs
 * `bool` and the user-space pt_regs. */
#include <stdbool.h>
#include <asm/ptrace.h>
#include <bpf/usdt.bpf.h>

/* Only the fields read, relocated to this kernel's layout by libbpf from its BTF (CO-RE). */
struct task_struct {
	int pid;
	int tgid;
	int exit_state;
	char comm[16];
	struct task_struct *real_parent;
	struct task_struct *group_leader;
} __attribute__((preserve_access_index));

#define MAX_FRAMES 32
#define TASK_COMM_LEN 16

char LICENSE[] SEC("license") = "GPL";

/* Set by the loader before the program is loaded: the shortest wait recorded, and the shortest
 * waits whose kernel stack and whose waker's stack are taken (a stack walk costs more than the
 * rest of the program, and an idle JVM's threads wait a millisecond or more thousands of times a
 * second). */
const volatile __u64 min_ns = 1000000;
const volatile __u64 stack_ns = 4000000;
const volatile __u64 waker_stack_ns = 4000000;
/* Which waits of a process not stalled (not armed) are recorded: 0, none (`watch`, whose many
 * idle JVMs wait thousands of times a second: between stalls the ring buffer and its reader
 * carry nothing); 1, those it did not choose (not an interruptible sleep: preempted, D, stopped),
 * which `run` keeps for a stall's waits that ended before it was noticed, while an idle JVM's
 * hundreds of timed sleeps a second stay out of the ring; 2, all. */
const volatile __u8 record_unarmed = 1;

struct sched_switch_args {
	__u64 common;
	char prev_comm[TASK_COMM_LEN];
	__s32 prev_pid;
	__s32 prev_prio;
	__s64 prev_state;
	char next_comm[TASK_COMM_LEN];
	__s32 next_pid;
	__s32 next_prio;
};

struct sched_wakeup_args {
	__u64 common;
	char comm[TASK_COMM_LEN];
	__s32 pid;
	__s32 prio;
	__s32 target_cpu;
};

/* One interval off a CPU, as the ring buffer carries it. */
struct offcpu_event {
	__u64 start;
	__u64 end;
	__u64 woken;        /* when the waker woke it; 0 if none was seen (preempted, or a signal) */
	__s64 state;        /* prev_state at the switch: 0 = preempted (runnable) */
	__u32 tid;
	__u32 tgid;
	__u32 waker_tid;
	__u32 waker_tgid;
	__u32 instead_tid;  /* preempted: who held its CPU longest while it waited (see `held`) */
	__u32 cpu;
	__u16 nframes;
	__u16 waker_nframes;
	__u32 instead_us;   /* how long that was, in µs (0: it had not left that CPU yet) */
	char comm[TASK_COMM_LEN];
	char waker_comm[TASK_COMM_LEN];
	char instead_comm[TASK_COMM_LEN];
	__u64 frames[MAX_FRAMES];
	__u64 waker_frames[MAX_FRAMES];
};

/* The processes whose threads are recorded, each with its value. The value's low byte: 1, their
 * waits' times, states and wakers; 2 (armed, while a stall of theirs is under way), their kernel
 * stacks and their wakers' too. The next byte: 1 + the process's slot in `sp` once its safepoint
 * probes are watched (0: not watched).
 *
 * Every switch and wake-up on the machine asks whether a process is a target, twice a switch.
 * A hash lookup touches its bucket, its element and the map's header, each a cache miss on a CPU
 * that was idle: most of the program's cost for other processes. So a target is found in
 * `tslots`, an array indexed by the low bits of its tgid (one line, no helper call): the entry
 * names the target that holds the index, and SPILL says other targets with the same low bits are
 * in the hash `targets` (written by the loader, which keeps the two in step). */
#define TSLOTS 65536
#define SPILL 0x80000000u

struct target_slot {
	__u32 tgid;
	__u32 value;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TSLOTS);
	__type(key, __u32);
	__type(value, struct target_slot);
} tslots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} targets SEC(".maps");

#define LEVEL(v) ((v) & 0xff)
#define SLOT(v) ((((v) >> 8) & 0xff) - 1)

/* A process's value (0: not a target). */
static __always_inline __u32 target_of(__u32 tgid)
{
	__u32 i = tgid & (TSLOTS - 1);
	struct target_slot *s = bpf_map_lookup_elem(&tslots, &i);
	if (!s || tgid == 0)
		return 0;
	__u32 v = s->value;
	if (s->tgid == tgid)
		return v & ~SPILL;
	if (!(v & SPILL))
		return 0;
	__u32 *h = bpf_map_lookup_elem(&targets, &tgid);
	return h ? *h : 0;
}

/* Each target thread's entry: while it is off a CPU, the interval so far; start 0 while it runs
 * (kept from wait to wait, written in place). The record's fields without its stacks, which are
 * taken rarely (`stacks`): 128 bytes, two cache lines in `toff` (whose values are page-aligned),
 * where the whole record is ten. */
struct off_entry {
	__u64 start;
	__u64 woken;
	__s64 state;
	__u32 tid;          /* in `toff`: the thread that holds the index (0: free) */
	__u32 tgid;
	__u32 waker_tid;
	__u32 waker_tgid;
	__u32 instead_tid;
	__u32 cpu;
	__u16 nframes;      /* the stacks in `stacks` are this wait's */
	__u16 waker_nframes;
	__u32 instead_us;
	char comm[TASK_COMM_LEN];
	char waker_comm[TASK_COMM_LEN];
	char instead_comm[TASK_COMM_LEN];
	__u64 on;           /* when it came onto a CPU, while it is on one; 0 off a CPU */
	__u8 spare[16];
};

/* The entries, found like the targets: in `toff`, an array indexed by the tid's low bits, whose
 * entry a thread takes at its first wait where the index is free and gives back at its last
 * switch (it exited); else in `off` (LRU: a thread that exits cannot leak one), a hash lookup
 * (bucket, element and header: three cache misses more than the array's entry). */
#define TOFF 16384
/* Set by the loader with the array's size (Options::entry_slots, a power of two). */
const volatile __u32 toff_mask = TOFF - 1;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TOFF);
	/* Mappable: its values then start on a page, so that each entry is two whole lines. */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct off_entry);
} toff SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct off_entry);
} off SEC(".maps");

/* A wait's kernel stack and its waker's, taken as it is woken (armed, and long enough), until
 * the thread is back on a CPU: valid while its entry's frame counts say so. */
struct stacks {
	__u64 frames[MAX_FRAMES];
	__u64 waker_frames[MAX_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2048);
	__type(key, __u32);
	__type(value, struct stacks);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* Records the ring buffer had no room for. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Scratch for making an entry in `stacks` (too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stacks);
} scratch SEC(".maps");

/* Thread `tid`'s entry, if it has one (the idle task, 0, has none: a free index reads 0). */
static __always_inline struct off_entry *entry_of(__u32 tid)
{
	if (tid == 0)
		return 0;
	__u32 i = tid & toff_mask;
	struct off_entry *e = bpf_map_lookup_elem(&toff, &i);
	if (e && e->tid == tid)
		return e;
	return bpf_map_lookup_elem(&off, &tid);
}

/* An index of `toff` given back by a thread that exited. An index never taken since the program
 * was loaded holds 0: no thread with that index had an event since (entries.rs counts on it). */
#define GONE 0xffffffffu

/* Thread `tid`'s entry, made if it has none (its process's `tgid` written into a new one): its
 * index in `toff` taken if free (compare and swap: two threads on one index may leave two CPUs at
 * once) and it has no entry in `off` already, else in `off`. Made at a thread's first event: it leaves a CPU, comes onto one, or is
 * woken. */
static __always_inline struct off_entry *entry_made(__u32 tid, __u32 tgid)
{
	__u32 i = tid & toff_mask;
	struct off_entry *e = bpf_map_lookup_elem(&toff, &i);
	if (!e)
		return 0;
	if (e->tid == tid)
		return e;
	/* A thread already in the hash stays there: its wait under way is there. Had it taken an
	 * index given back meanwhile (its holder exited), its wake-up would land on a blank entry
	 * and the wait in the hash would lose its waker and stack (seen in tests/naps.rs). */
	struct off_entry *h = bpf_map_lookup_elem(&off, &tid);
	if (h)
		return h;
	__u32 was = e->tid;
	if (was == 0 || was == GONE) {
		__u32 got = __sync_val_compare_and_swap(&e->tid, was, tid);
		if (got == was) {
			e->tgid = tgid;
			return e;
		}
		/* Taken on another CPU by this same thread's other event (its switch and a wake-up
		 * that raced it): one entry, not a second in the hash that the index would hide. */
		if (got == tid)
			return e;
	}
	struct off_entry blank = {.tid = tid, .tgid = tgid};
	bpf_map_update_elem(&off, &tid, &blank, BPF_NOEXIST);
	return bpf_map_lookup_elem(&off, &tid);
}

/* Thread `tid` leaves a CPU for the last time (it exited): its entry goes. */
static __always_inline void entry_gone(__u32 tid)
{
	__u32 i = tid & toff_mask;
	struct off_entry *e = bpf_map_lookup_elem(&toff, &i);
	if (e && e->tid == tid) {
		e->on = 0;
		e->start = 0;
		/* Given back last: a thread taking the index finds no wait under way in it. */
		__sync_val_compare_and_swap(&e->tid, tid, GONE);
	}
	/* An entry it had in the hash before its index was free. */
	bpf_map_delete_elem(&off, &tid);
	bpf_map_delete_elem(&stacks, &tid);
}

/* Thread `tid`'s entry in `stacks`, made if it has none. */
static __always_inline struct stacks *stacks_made(__u32 tid)
{
	struct stacks *st = bpf_map_lookup_elem(&stacks, &tid);
	if (st)
		return st;
	__u32 zero = 0;
	struct stacks *blank = bpf_map_lookup_elem(&scratch, &zero);
	if (!blank)
		return 0;
	bpf_map_update_elem(&stacks, &tid, blank, BPF_NOEXIST);
	return bpf_map_lookup_elem(&stacks, &tid);
}

/* The safepoints of the JVMs whose probes are watched, one slot each (`run` and `attach`: slot 0,
 * its one JVM; `watch`: slots 1 on, the JVMs it guards, with their own watchdog timers in
 * `spdog`): written by the probes, read in place by the recorder (the map is mapped into its
 * memory). A JVM's slot is in its `targets` value. `open_since`: the
 * safepoint under way began then (0: none); `seq` counts begins; `after_ns` (written by the
 * recorder): how long a safepoint may last before the watchdog's alarm; `ring`: the last
 * SP_RING safepoints' begin and end (0 while open), the n-th begun at ring[n % SP_RING], so a
 * safepoint's end is still there when the next ones began before the recorder looked. HotSpot
 * fires the begin probe as its safepoint begins, before the threads are stopped, and the end
 * probe after they are let go: the whole pause its safepoint log reports. Only the VM thread
 * fires them, one safepoint after the other. */
#define SP_RING 8
#define SP_SLOTS 255

struct sp_span {
	__u64 begin;
	__u64 end;
};

struct sp_state {
	__u64 open_since;
	__u64 seq;
	__u64 after_ns;
	__u64 gen;      /* written by the recorder: which watching of the slot this is */
	struct sp_span ring[SP_RING];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct sp_state);
} sp SEC(".maps");

/* The slot of the current process in `sp`, or 0 when its safepoints are not watched. */
static __always_inline struct sp_state *my_sp(void)
{
	__u32 v = target_of(bpf_get_current_pid_tgid() >> 32);
	if (!(v >> 8))
		return 0;
	__u32 slot = SLOT(v);
	return bpf_map_lookup_elem(&sp, &slot);
}

/* The watchdog, when a target's thread leaves a CPU: see on_switch_btf. */
static __always_inline void watchdog(__u32 tid, _Bool preempt, unsigned int raw_state);
/* `watch`'s per-JVM safepoint watchdog, when a target's thread leaves a CPU: see spdog. */
static __always_inline void sp_watchdog(__u32 target);

/* The state as the classic tracepoint reports it (__trace_sched_switch_state): preempted,
 * TASK_REPORT_MAX (0x100); else one bit, the highest of the state's TASK_REPORT bits with the
 * exit state's (S 1, D 2, T 4, t 8, X 16, Z 32, P 64), I (idle) 128. */
static __always_inline __s64 reported(_Bool preempt, unsigned int raw, struct task_struct *p)
{
	if (!p)
		return 0;
	if (preempt)
		return 0x100;
	if (raw == 0x402) /* TASK_IDLE */
		return 0x80;
	unsigned int st = (raw | (unsigned int)p->exit_state) & 0x7f;
	if (raw == 0x1000) /* TASK_RTLOCK_WAIT */
		st = 2;
	for (int b = 6; b >= 0; b--)
		if (st & (1u << b))
			return 1 << b;
	return 0;
}

/* Who ran instead of a preempted thread: the task that took its CPU as it left is often one that
 * holds it for µs (a timer thread's wake-up preempts the running task, runs and sleeps again),
 * while the CPU then goes for ms to others. So each CPU keeps the last target thread preempted
 * there while it waits for a CPU, and since when the task now on the CPU has run; at each switch
 * there the task leaving is named in the waiting thread's entry if it ran longer than the one
 * named so far: `instead` is who held the CPU longest while it waited, for `instead_us`. One
 * line per CPU. A waiting thread that another preemption on its CPU displaces from the slot keeps
 * what it had; one that comes back on another CPU keeps the tasks that had left its own. The
 * entry is written by this CPU while its thread may come back on another: a record may then
 * name the one before (a race of a switch's length). */
#define HELD_CPUS 1024

struct held_cpu {
	__u32 tid;   /* the waiting thread (0: none) */
	__u32 pad;
	__u64 since; /* when the task now on the CPU came on it */
	__u8 line[48];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HELD_CPUS);
	__type(key, __u32);
	__type(value, struct held_cpu);
} held SEC(".maps");

/* A switch on this CPU (`h`, its slot) from `prev` (current) while a preempted thread waits: the
 * time `prev` ran counted for it. */
static __always_inline void held_switch(struct held_cpu *h, __u32 prev, __u32 next, __u64 now)
{
	__u32 w = h->tid;
	struct off_entry *e = entry_of(w);
	/* Back on a CPU, or off it again by its own choice: nothing waits here. */
	if (!e || !e->start || (e->state & 0xff) != 0) {
		h->tid = 0;
		return;
	}
	__u64 ran_us = (now - h->since) / 1000;
	if (ran_us > 0xffffffffULL)
		ran_us = 0xffffffffULL;
	/* The idle task: the CPU was free, so the thread no longer waited for this one. */
	if (prev != 0 && prev != w && ran_us >= e->instead_us) {
		e->instead_tid = prev;
		bpf_get_current_comm(e->instead_comm, TASK_COMM_LEN);
		e->instead_us = ran_us;
	}
	/* Back on this CPU: its record is made next, from the entry as it stands now. */
	if (next == w)
		h->tid = 0;
	else
		h->since = now;
}

/* A switch: the names and the state are read only for a target's thread leaving (its own name
 * is current's; the next thread's from `next_comm`, else from `next_task`; the state `state`,
 * else reported from `prev`'s). `next_ours`: the next thread may be a target's (0 only where its
 * process is known not to be: then its interval off a CPU is not looked up); `next_tgid` its
 * process where known (0: not, the classic tracepoint: then no entry is made for it). The leaving
 * thread's process's `targets` value (0: not a target's). */
static __always_inline int switched(__u32 tgid, __u32 tid, __s64 state, __u32 next, int next_ours,
				    __u32 next_tgid, struct task_struct *next_task, const char *next_comm,
				    struct task_struct *prev, _Bool preempt, unsigned int raw)
{
	__u32 zero = 0;
	/* For every other process's switch, a look in the targets (two with the BTF tracepoint,
	 * which names the next thread's process), and for the next thread's entry where it cannot
	 * tell (the classic tracepoint); the clock only for ours. */
	__u32 target = tid != 0 ? target_of(tgid) : 0;
	int leaving = target != 0;
	/* This CPU's preempted target thread, if one waits: one array line, for every switch. */
	__u32 cpu = bpf_get_smp_processor_id();
	struct held_cpu *h = cpu < HELD_CPUS ? bpf_map_lookup_elem(&held, &cpu) : 0;
	__u64 now = 0;
	if (h && h->tid) {
		now = bpf_ktime_get_ns();
		held_switch(h, tid, next, now);
	}
	struct off_entry *o = !next_ours ? 0 : next_tgid ? entry_made(next, next_tgid) : entry_of(next);
	if (!leaving && !o)
		return 0;
	if (!now)
		now = bpf_ktime_get_ns();

	/* The thread leaving the CPU (current), if it is a target's: its entry, kept from its last
	 * wait (only a thread's first wait makes one), is written in place. An entry made and
	 * deleted at every switch cost most of the program, for many idle JVMs' threads. */
	if (leaving) {
		/* From the BTF tracepoint (state < 0): reported here, for a target only. */
		__s64 st = state >= 0 ? state : reported(preempt, raw, prev);
		/* Its last switch (X, Z: it exited): no wait begins; its entry goes. */
		struct off_entry *e = st & 0x30 ? 0 : entry_made(tid, tgid);
		if (st & 0x30)
			entry_gone(tid);
		if (e) {
			/* Stacks its last wait still holds: taken by a wake-up that raced its switch
			 * back in (after that read its frame counts), or before its process was taken
			 * out of the targets and added again. This wait's are taken afresh. */
			if (e->nframes || e->waker_nframes)
				bpf_map_delete_elem(&stacks, &tid);
			/* Off the CPU first: a reader that finds `on` unchanged around its read of
			 * `start` knows the thread did not leave meanwhile (entries.rs). */
			e->on = 0;
			__asm__ __volatile__("" ::: "memory");
			e->start = 0; /* not off a CPU until written whole (a waker may look meanwhile) */
			e->woken = 0;
			e->state = st;
			e->tgid = tgid;
			e->waker_tid = 0;
			e->waker_tgid = 0;
			e->waker_nframes = 0;
			e->instead_tid = next;
			e->instead_us = 0;
			e->cpu = cpu;
			bpf_get_current_comm(e->comm, TASK_COMM_LEN);
			/* Who ran instead matters to a preempted thread (R) alone: first the task that
			 * took its CPU, then whoever holds it longest while it waits (held_switch). */
			if ((st & 0xff) != 0) {
				e->instead_tid = 0;
				e->instead_comm[0] = 0;
			} else {
				if (next_comm)
					__builtin_memcpy(e->instead_comm, next_comm, TASK_COMM_LEN);
				else
					BPF_CORE_READ_STR_INTO(&e->instead_comm, next_task, comm);
				if (h) {
					h->tid = tid;
					h->since = now;
				}
			}
			/* No stack here: most waits are short, and a stack walk in every switch is most of
			 * the cost. A sleeping thread's stack does not change, so it is taken when it is
			 * woken, for a wait long enough to be kept (on_waking). */
			e->nframes = 0;
			/* Every field above written before the start that says the wait is under way
			 * (a compiler barrier: x86 keeps stores in order). */
			__asm__ __volatile__("" ::: "memory");
			e->start = now;
		}
	}

	/* The thread coming onto the CPU: its interval off it ends now (an entry whose start is 0
	 * is of a thread not off a CPU). From now it is on one, until it leaves: a thread on a CPU
	 * without a break since its last read is not read again mid-stall (entries.rs). */
	if (!o)
		return target;
	o->on = now;
	if (!o->start)
		return target;
	/* Preempted on another CPU and back on this one: that CPU's slot is given up. */
	if ((o->state & 0xff) == 0 && o->cpu != cpu && o->cpu < HELD_CPUS) {
		__u32 other = o->cpu;
		struct held_cpu *oh = bpf_map_lookup_elem(&held, &other);
		if (oh && oh->tid == next)
			__sync_val_compare_and_swap(&oh->tid, next, 0);
	}
	/* Its stacks in `stacks`, taken as it was woken, until a record takes them. */
	int stacked = o->nframes || o->waker_nframes;
	int keep = now - o->start >= min_ns;
	/* TASK_INTERRUPTIBLE alone: a sleep the thread asked for (a futex, a socket, a timer). */
	if (keep && (record_unarmed == 0 || (record_unarmed == 1 && o->state == 1)))
		keep = LEVEL(target_of(o->tgid)) >= 2;
	if (keep) {
		struct offcpu_event *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
		if (r) {
			r->start = o->start;
			r->end = now;
			r->woken = o->woken;
			r->state = o->state;
			r->tid = next;
			r->tgid = o->tgid;
			r->waker_tid = o->waker_tid;
			r->waker_tgid = o->waker_tgid;
			r->instead_tid = o->instead_tid;
			r->cpu = o->cpu;
			r->instead_us = o->instead_us;
			__builtin_memcpy(r->comm, o->comm, 3 * TASK_COMM_LEN);
			struct stacks *st = stacked ? bpf_map_lookup_elem(&stacks, &next) : 0;
			if (st) {
				__builtin_memcpy(r->frames, st->frames, sizeof(*st));
				r->nframes = o->nframes;
				r->waker_nframes = o->waker_nframes;
			} else {
				r->nframes = 0;
				r->waker_nframes = 0;
				/* A sleep whose wake-up the program did not see (woken 0) has no stack yet:
				 * the thread's stack is still the wait's as it comes back (it has not run),
				 * taken now where on_waking would have. Not for a preempted thread, whose
				 * stack on_waking never takes. */
				if (next_task && !o->woken && (o->state & 0xff) != 0 &&
				    now - o->start >= stack_ns && LEVEL(target_of(o->tgid)) >= 2) {
					long n = bpf_get_task_stack(next_task, r->frames, sizeof(r->frames), 0);
					r->nframes = n > 0 ? (__u64)n >> 3 : 0;
				}
			}
			bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
		} else {
			__u64 *l = bpf_map_lookup_elem(&lost, &zero);
			if (l)
				*l += 1;
		}
	}
	/* Used, or not kept (its process disarmed between its wake-up and now, the ring full):
	 * either way its LRU node is free for another thread's. Left, it stayed until the thread
	 * exited: the soak's `stacks` map kept 54 such entries at its end. */
	if (stacked) {
		bpf_map_delete_elem(&stacks, &next);
		o->nframes = 0;
		o->waker_nframes = 0;
	}
	o->start = 0;
	return target;
}

/* Every process's CPU time on the machine while a stall is under way anywhere (`run`, `attach`,
 * `watch`: who took the CPUs from the stalled), counted at each switch to the ns, and nothing
 * counted between stalls: `tally_on` (written by the recorder) holds the counting's epoch (0: not
 * counting) and when it began. Each process's time in the epoch is in `cputime` (LRU: processes
 * gone are evicted first; an entry of an older epoch is stale), each CPU's task now on it (since
 * the epoch's last switch there) in `oncpu`, so that a reader adds what runs now. Only in the BTF
 * tracepoint's program (the next task's process is read from the task). */
struct tally_on {
	__u64 epoch;
	__u64 since;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tally_on);
} tally_on SEC(".maps");

struct proc_time {
	__u64 epoch;
	__u64 ns;
	__u32 ptgid;
	__u32 ended; /* its main thread left a CPU for the last time (it exited) */
	char comm[TASK_COMM_LEN]; /* the process's (its main thread's) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct proc_time);
} cputime SEC(".maps");

struct cpu_run {
	__u64 since;
	__u64 epoch;
	__u32 tgid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_run);
} oncpu SEC(".maps");

/* At a switch from `prev` (current, of process `tgid`; 0: the idle task) to `next`: the time
 * `prev` ran in the epoch is added to its process's. */
static __always_inline void tally(__u32 tgid, struct task_struct *prev, struct task_struct *next)
{
	__u32 zero = 0;
	struct tally_on *on = bpf_map_lookup_elem(&tally_on, &zero);
	if (!on || !on->epoch)
		return;
	struct cpu_run *c = bpf_map_lookup_elem(&oncpu, &zero);
	if (!c)
		return;
	/* Written by the recorder as a whole but read here a field at a time: an epoch without its
	 * start (half-written) counts nothing, rather than the machine's uptime. */
	__u64 epoch = on->epoch, since = on->since, now = bpf_ktime_get_ns();
	if (!since || since > now)
		return;
	/* A task on the CPU since before the epoch (or whose switch in was another epoch's) ran in
	 * it from the epoch's start. */
	__u64 start = c->epoch == epoch && c->since > since ? c->since : since;
	c->since = now;
	c->epoch = epoch;
	c->tgid = next->tgid;
	if (tgid == 0 || now <= start)
		return;
	__u64 d = now - start;
	/* The process's main thread, dead, leaves its CPU for the last time: the process ended (a
	 * build's compiler, counted at its parent by the reader). */
	__u32 ended = prev->exit_state != 0 && prev->pid == (int)tgid;
	struct proc_time *p = bpf_map_lookup_elem(&cputime, &tgid);
	if (p && p->epoch == epoch) {
		__sync_fetch_and_add(&p->ns, d);
		if (ended)
			p->ended = 1;
		return;
	}
	struct proc_time n = {.epoch = epoch, .ns = d, .ended = ended};
	n.ptgid = BPF_CORE_READ(prev, real_parent, tgid);
	BPF_CORE_READ_STR_INTO(&n.comm, prev, group_leader, comm);
	bpf_map_update_elem(&cputime, &tgid, &n, BPF_ANY);
}

/* The classic tracepoint, for kernels whose BTF tracepoint lacks `prev_state` (before 5.18):
 * its record carries the state already reported (one bit per letter; preempted: 0x100). */
SEC("tracepoint/sched/sched_switch")
int on_switch(struct sched_switch_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	/* Copied here: the verifier refuses a load through a pointer into the record (ctx + 40)
	 * once it is handed on. The leaving thread's name is current's. */
	char next_comm[TASK_COMM_LEN];
	__builtin_memcpy(next_comm, ctx->next_comm, TASK_COMM_LEN);
	switched(id >> 32, (__u32)id, ctx->prev_state, ctx->next_pid, 1, 0, 0, next_comm, 0, 0, 0);
	return 0;
}

/* The BTF tracepoint: its arguments are the tasks themselves, with no record built (cheaper for
 * every switch on the machine), and BPF timers are allowed here, so it also runs the watchdog. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch_btf, _Bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	/* Direct loads (a BTF tracepoint's tasks are trusted pointers): no helper call. */
	__u32 next_pid = next->pid;
	int next_ours = next_pid != 0 && target_of(next->tgid) != 0;
	/* Only a target's thread can be the meter watched, or show a safepoint begun. */
	__u32 target =
	    switched(id >> 32, tid, -1, next_pid, next_ours, next->tgid, next, 0, prev, preempt, prev_state);
	tally(id >> 32, prev, next);
	if (target) {
		watchdog(tid, preempt, prev_state);
		sp_watchdog(target);
	}
	return 0;
}

/* sched_waking fires in the waker's own context, in try_to_wake_up, before the woken thread is
 * queued (sched_wakeup may fire later on the woken thread's CPU, from an IPI, where the waker is
 * unknown). Its BTF form hands the woken task itself, whose kernel stack is still the wait's. */
SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	/* Every wake-up on the machine: the woken task's process looked up in the targets (an
	 * array's entry), its thread's entry only for a target's thread. */
	__u32 armed = target_of(p->tgid);
	if (!armed)
		return 0;
	__u32 tid = p->pid;
	/* Made if it has none (asleep since before its process became a target): from now on its
	 * index says it had an event (entries.rs). */
	struct off_entry *o = entry_made(tid, p->tgid);
	/* Not off a CPU (start 0: its entry is kept from its last wait), or woken already. */
	if (!o || !o->start || o->woken)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	o->woken = now;
	o->waker_tid = (__u32)id;
	o->waker_tgid = id >> 32;
	/* Its name always: a wait recorded has its waker named (it may reach min_ns waiting for a
	 * CPU after this). */
	bpf_get_current_comm(o->waker_comm, TASK_COMM_LEN);
	if (now - o->start < min_ns)
		return 0;
	/* The woken thread's stack (a walk of it costs more than all the rest) only while a stall
	 * of its process is under way, and for a wait long enough to matter to it: the waits that
	 * make a stall end when it does, after it was noticed. */
	if (LEVEL(armed) < 2 || now - o->start < stack_ns)
		return 0;
	struct stacks *st = stacks_made(tid);
	if (!st)
		return 0;
	long n = bpf_get_task_stack(p, st->frames, sizeof(st->frames), 0);
	o->nframes = n > 0 ? (__u64)n >> 3 : 0;
	/* The waker's stack only for a wait long enough to matter. */
	if (now - o->start >= waker_stack_ns) {
		n = bpf_get_stack(ctx, st->waker_frames, sizeof(st->waker_frames), 0);
		o->waker_nframes = n > 0 ? (__u64)n >> 3 : 0;
	}
	return 0;
}

/* The JVM's safepoint probes (no arguments, no semaphore: always compiled in). A uprobe program
 * may not start a BPF timer, so the watchdog's timer is set for an open safepoint at the next
 * switch of one of the JVM's threads (the VM thread waiting for the others, a thread blocking at
 * the safepoint, the meter at its next tick at the latest). */
SEC("usdt")
int BPF_USDT(on_sp_begin)
{
	struct sp_state *s = my_sp();
	if (!s)
		return 0;
	__u64 now = bpf_ktime_get_ns(), n = s->seq;
	struct sp_span *r = &s->ring[n & (SP_RING - 1)];
	r->begin = now;
	r->end = 0;
	s->open_since = now;
	/* Published last: a reader that sees the count sees the slot. */
	__sync_fetch_and_add(&s->seq, 1);
	return 0;
}

SEC("usdt")
int BPF_USDT(on_sp_end)
{
	struct sp_state *s = my_sp();
	if (!s)
		return 0;
	__u64 n = s->seq;
	/* An end without its begin (the probes attached inside a safepoint): nothing to close. */
	if (n == 0 || !s->open_since)
		return 0;
	s->ring[(n - 1) & (SP_RING - 1)].end = bpf_ktime_get_ns();
	s->open_since = 0;
	return 0;
}

/* The watchdog: the agent's meter thread (`tid`, host numbering) leaves a CPU in an
 * interruptible sleep once per tick. Each such sleep restarts a timer to fire when the heartbeat
 * would be stale: `after_ns` (the meter's resolution plus the threshold) after the meter's last
 * tick, read from its heartbeat at `tick_addr` in its own memory (the meter is the task leaving
 * the CPU, so its memory is current's), or after the sleep where it cannot be read. A meter held
 * (blocked on a safepoint, preempted, stopped, in a fault) ticks no more; a meter blocked at a
 * safepoint after waking on time restarts it from the old tick, so the alarm still comes when
 * the heartbeat goes stale. The callback puts a record in `alarms`, which wakes the recorder: it
 * sleeps between stalls instead of looking once per threshold. tid 0: no meter watched.
 * Written by the loader's thread. */
struct watch_cfg {
	__u32 tid;
	__u32 pad;
	__u64 after_ns;
	__u64 tick_addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct watch_cfg);
} watch SEC(".maps");

struct watchdog {
	struct bpf_timer timer;
	__u32 ready;
	__u32 pad;
	/* When the meter's heartbeat goes stale (set as it goes to sleep), and the safepoint whose
	 * alarm the timer was last set for (its begin). */
	__u64 meter_due;
	__u64 sp_armed;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct watchdog);
} dog SEC(".maps");

/* One record per alarm: when it fired (CLOCK_MONOTONIC ns). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} alarms SEC(".maps");

static int on_alarm(void *map, __u32 *key, struct watchdog *d)
{
	__u64 now = bpf_ktime_get_ns();
	/* The meter's heartbeat stale, or the safepoint the timer was set for still under way (the
	 * timer is not cancelled as a safepoint ends short of it). */
	__u32 zero = 0;
	struct sp_state *s = bpf_map_lookup_elem(&sp, &zero);
	int meter = d->meter_due && d->meter_due <= now;
	int safepoint = s && s->open_since && s->open_since == d->sp_armed;
	if (!meter && !safepoint)
		return 0;
	/* A full ring (the recorder has not read it) already holds an alarm: nothing is lost. */
	bpf_ringbuf_output(&alarms, &now, sizeof(now), 0);
	return 0;
}

/* Starts the timer for the earlier of the meter's heartbeat going stale and the safepoint under
 * way lasting `after_ns`. */
static __always_inline void set_timer(struct watchdog *d, __u64 now, _Bool meter)
{
	__u32 zero = 0;
	/* From another thread's switch, a meter deadline already past is an old one (its alarm
	 * came, or a safepoint's took its place): the safepoint's alone then. */
	__u64 due = meter || d->meter_due > now ? d->meter_due : 0;
	struct sp_state *s = bpf_map_lookup_elem(&sp, &zero);
	/* A safepoint whose alarm is past is not alarmed again (the recorder has it). */
	if (s && s->open_since && s->after_ns &&
	    (s->open_since != d->sp_armed || s->open_since + s->after_ns > now)) {
		__u64 sp_due = s->open_since + s->after_ns;
		d->sp_armed = s->open_since;
		if (!due || sp_due < due)
			due = sp_due;
	}
	if (!due)
		return;
	/* Already due (it is going to sleep without having ticked for that long): now. */
	bpf_timer_start(&d->timer, due > now ? due - now : 1000, 0);
}

/* `watch`'s watchdog, one timer per JVM slot (1 on): a safepoint of a guarded JVM that lasts
 * `after_ns` puts a record in `alarms`. Its timer is set at the first switch of one of the JVM's
 * threads after the begin probe (a uprobe program may not start a timer). */
struct spdog {
	struct bpf_timer timer;
	__u32 ready;
	__u32 pad;
	/* The safepoint (its begin) the timer was last set for. */
	__u64 armed;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_SLOTS);
	__type(key, __u32);
	__type(value, struct spdog);
} spdog SEC(".maps");

static int on_sp_alarm(void *map, __u32 *key, struct spdog *d)
{
	/* Only for the safepoint it was set for, still under way: most end well short of it (the
	 * timer is set for nearly every one, and not cancelled as it ends). */
	struct sp_state *s = bpf_map_lookup_elem(&sp, key);
	if (!s || !s->open_since || s->open_since != d->armed)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	bpf_ringbuf_output(&alarms, &now, sizeof(now), 0);
	return 0;
}

static __always_inline void sp_watchdog(__u32 target)
{
	__u32 slot = SLOT(target);
	/* Not watched, or slot 0 (`run`'s, whose watchdog also watches its meter). */
	if (!(target >> 8) || slot == 0)
		return;
	struct sp_state *s = bpf_map_lookup_elem(&sp, &slot);
	if (!s || !s->open_since || !s->after_ns)
		return;
	struct spdog *d = bpf_map_lookup_elem(&spdog, &slot);
	if (!d || d->armed == s->open_since)
		return;
	if (!d->ready) {
		long r = bpf_timer_init(&d->timer, &spdog, 1 /* CLOCK_MONOTONIC */);
		if (r != 0 && r != -16)
			return;
		bpf_timer_set_callback(&d->timer, on_sp_alarm);
		d->ready = 1;
	}
	__u64 now = bpf_ktime_get_ns(), due = s->open_since + s->after_ns;
	d->armed = s->open_since;
	bpf_timer_start(&d->timer, due > now ? due - now : 1000, 0);
}

static __always_inline void watchdog(__u32 tid, _Bool preempt, unsigned int prev_state)
{
	__u32 zero = 0;
	struct watch_cfg *c = bpf_map_lookup_elem(&watch, &zero);
	if (!c || c->tid == 0)
		return;
	struct watchdog *d = bpf_map_lookup_elem(&dog, &zero);
	if (!d)
		return;
	/* The raw state: TASK_INTERRUPTIBLE (1), with TASK_FREEZABLE (0x2000) in a sleep or a
	 * futex wait on recent kernels; anything else (preempted, D, stopped, frozen) is a meter
	 * held, not asleep. */
	if (c->tid != tid || preempt || (prev_state & 0xfff) != 1) {
		/* Another thread of the JVM: a safepoint begun since the timer was last set gets its
		 * alarm (once the meter has set up the timer). */
		struct sp_state *s = bpf_map_lookup_elem(&sp, &zero);
		if (d->ready && s && s->open_since && s->open_since != d->sp_armed && s->after_ns)
			set_timer(d, bpf_ktime_get_ns(), 0);
		return;
	}
	if (!d->ready) {
		/* -EBUSY: another CPU initialised it first. */
		long r = bpf_timer_init(&d->timer, &dog, 1 /* CLOCK_MONOTONIC */);
		if (r != 0 && r != -16)
			return;
		bpf_timer_set_callback(&d->timer, on_alarm);
		d->ready = 1;
	}
	__u64 now = bpf_ktime_get_ns(), last = 0;
	d->meter_due = now + c->after_ns;
	if (c->tick_addr &&
	    bpf_probe_read_user(&last, sizeof(last), (const void *)c->tick_addr) == 0 && last)
		d->meter_due = last + c->after_ns;
	set_timer(d, now, 1);
}
