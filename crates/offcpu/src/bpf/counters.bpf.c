// SPDX-License-Identifier: GPL-2.0
// stallscope's machine counters counted in the kernel, where their file is dear to read.
// TLB shootdowns received, per CPU: the `TLB` row of /proc/interrupts (irq_tlb_count), which
// costs about 60 µs a read (the whole file, every IRQ's row formatted per CPU) against a map
// lookup here. The kernel counts a shootdown in flush_tlb_func when another CPU asked for it,
// and that CPU asks through a cross-CPU call whose function is flush_tlb_func: the
// csd_function_entry tracepoint with a csd (the initiator's own flush runs the function
// directly, without one, and is not counted in the file either). Its address comes from
// /proc/kallsyms (the loader's); its data symbol (irq_stat) is not there on kernels without
// CONFIG_KALLSYMS_ALL, which is why the count is not read in place.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* flush_tlb_func's address (set by the loader). */
const volatile __u64 flush_fn = 0;

/* Shootdowns received since the program was attached, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tlb SEC(".maps");

/* csd_function_entry(smp_call_func_t func, call_single_data_t *csd): every function run on a
 * CPU for a cross-CPU call (a few thousand a second on a busy machine). A raw tracepoint: its
 * arguments as plain words (the BTF form refuses a function pointer's), with no record built. */
SEC("raw_tp/csd_function_entry")
int on_csd(struct bpf_raw_tracepoint_args *ctx)
{
	if (ctx->args[0] != flush_fn || ctx->args[1] == 0)
		return 0;
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&tlb, &zero);
	if (n)
		*n += 1;
	return 0;
}
