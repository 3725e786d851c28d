// stallscope's report page: draws a recording or a lab run from the JSON data embedded in this
// file. No network, no libraries: canvases and the DOM. Errors of any kind are written into
// #errors and counted in body[data-errors], so a headless browser can tell a broken page.
(function () {
  "use strict";
  var t0 = performance.now();
  var errorCount = 0;
  function reportError(msg) {
    errorCount++;
    document.body.dataset.errors = String(errorCount);
    var box = document.getElementById("errors");
    if (box) {
      box.hidden = false;
      box.textContent += msg + "\n";
    }
  }
  window.addEventListener("error", function (e) {
    reportError("error: " + e.message + (e.filename ? " at " + e.filename + ":" + e.lineno : ""));
  });
  window.addEventListener("unhandledrejection", function (e) {
    reportError("unhandled rejection: " + e.reason);
  });
  var consoleError = console.error;
  console.error = function () {
    reportError("console.error: " + Array.prototype.join.call(arguments, " "));
    consoleError.apply(console, arguments);
  };

  // ---------------------------------------------------------------- formatting
  function sig3(x) {
    if (x >= 100) return x.toFixed(0);
    if (x >= 10) return x.toFixed(1);
    return x.toFixed(2);
  }
  function fmtNs(ns) {
    if (ns === null || ns === undefined || isNaN(ns)) return "–";
    var a = Math.abs(ns);
    if (a >= 3600e9) return sig3(ns / 3600e9) + " h";
    if (a >= 60e9) return sig3(ns / 60e9) + " min";
    if (a >= 1e9) return sig3(ns / 1e9) + " s";
    if (a >= 1e6) return sig3(ns / 1e6) + " ms";
    if (a >= 1e3) return sig3(ns / 1e3) + " µs";
    return Math.round(ns) + " ns";
  }
  function fmtNum(x) {
    if (x === null || x === undefined || isNaN(x)) return "–";
    var a = Math.abs(x);
    if (Number.isInteger(x) && a < 1e9) return x.toLocaleString("en-US");
    if (a >= 1e6 || (a > 0 && a < 0.01)) return x.toExponential(2);
    if (a >= 1000) return Math.round(x).toLocaleString("en-US");
    return sig3(x);
  }
  function fmtSecs(s, step) {
    // Axis labels: seconds since the start, with as many decimals as the tick step needs;
    // minutes and hours once the steps are that long.
    if (step >= 60) {
      var h = Math.floor(s / 3600), m = Math.round((s % 3600) / 60);
      if (m === 60) { h++; m = 0; }
      return h ? h + "h" + (m < 10 ? "0" : "") + m : m + " min";
    }
    var d = step >= 1 ? 0 : Math.min(6, Math.ceil(-Math.log10(step) - 1e-9));
    return s.toFixed(d);
  }
  // Ticks on a time axis in seconds: decimal below a minute, clock-like steps above.
  var TIME_STEPS = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];
  function timeTicks(lo, hi, count) {
    var raw = (hi - lo) / Math.max(1, count);
    if (raw < 45) return ticks(lo, hi, count);
    var step = TIME_STEPS.filter(function (x) { return x >= raw; })[0] || Math.ceil(raw / 604800) * 604800;
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi; v += step) out.push(v);
    return { step: step, values: out };
  }
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (k === "text") e.textContent = attrs[k];
        else if (k === "cls") e.className = attrs[k];
        else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
        else e.setAttribute(k, attrs[k]);
      }
    }
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return e;
  }
  // Colours come from the stylesheet (light or dark); looked up once per redraw, not per bar.
  var cssCache = {};
  function css(name) {
    if (!(name in cssCache)) cssCache[name] = getComputedStyle(document.documentElement).getPropertyValue("--" + name).trim() || "#888";
    return cssCache[name];
  }
  // Each cause's colour comes with the data, from the cause's own module.
  function causeVar(c) {
    return (D.cause_colours || {})[c] || "muted";
  }
  function causeColor(c) {
    return css(causeVar(c));
  }

  // ---------------------------------------------------------------- canvas helpers
  function setup(canvas, cssHeight) {
    var w = canvas.parentElement.clientWidth || 1000;
    var dpr = window.devicePixelRatio || 1;
    canvas.style.height = cssHeight + "px";
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(cssHeight * dpr);
    var ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, cssHeight);
    ctx.font = "11px system-ui, sans-serif";
    return { ctx: ctx, w: w, h: cssHeight };
  }
  function niceStep(range, count) {
    var raw = range / Math.max(1, count);
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10) * p;
  }
  function ticks(lo, hi, count) {
    if (!(hi > lo)) return { step: 1, values: [lo] };
    var step = niceStep(hi - lo, count);
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return { step: step, values: out };
  }
  // Counts pixels that differ from the canvas's corner: a blank chart has none.
  function ink(canvas) {
    try {
      var ctx = canvas.getContext("2d");
      var d = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      var n = 0;
      for (var i = 0; i < d.length; i += 4 * 7) if (d[i + 3] > 0) n++;
      return n;
    } catch (e) {
      return -1;
    }
  }
  function lowerBound(arr, x) {
    var lo = 0, hi = arr.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (arr[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // ---------------------------------------------------------------- sortable tables
  function sortableTable(columns, rows, opts) {
    // columns: [{label, key, num, fmt, title}]; rows: objects.
    opts = opts || {};
    var tbody = el("tbody");
    var state = { key: opts.sortKey || null, desc: opts.desc !== false };
    var heads = columns.map(function (c) {
      var th = el("th", { cls: "sortable" + (c.num ? " num" : ""), title: c.title || "sort by " + c.label, text: c.label });
      th.addEventListener("click", function () {
        if (state.key === c.key) state.desc = !state.desc; else { state.key = c.key; state.desc = !!c.num; }
        draw();
      });
      return th;
    });
    function draw() {
      var sorted = rows.slice();
      if (state.key) {
        var col = columns.filter(function (c) { return c.key === state.key; })[0];
        sorted.sort(function (a, b) {
          var x = a[state.key], y = b[state.key];
          var r = col && col.num ? (x - y) : String(x).localeCompare(String(y));
          return state.desc ? -r : r;
        });
      }
      heads.forEach(function (th, i) {
        th.classList.toggle("sorted-asc", columns[i].key === state.key && !state.desc);
        th.classList.toggle("sorted-desc", columns[i].key === state.key && state.desc);
      });
      tbody.textContent = "";
      var limit = opts.limit || 2000;
      sorted.slice(0, limit).forEach(function (r) {
        var tr = el("tr", opts.onRow ? { cls: "clickable" } : null, columns.map(function (c) {
          var v = r[c.key];
          return el("td", { cls: c.num ? "num" : "", text: c.fmt ? c.fmt(v, r) : String(v) });
        }));
        if (opts.onRow) tr.addEventListener("click", function () { opts.onRow(r, tr); });
        if (opts.rowId) tr.dataset.id = opts.rowId(r);
        tbody.appendChild(tr);
      });
      if (sorted.length > limit) tbody.appendChild(el("tr", null, [el("td", { colspan: columns.length, cls: "muted", text: (sorted.length - limit) + " more rows not shown; sort to see others" })]));
    }
    draw();
    var table = el("table", null, [el("thead", null, [el("tr", null, heads)]), tbody]);
    table.redraw = draw;
    return table;
  }

  var redrawers = [];
  function redrawAll() {
    cssCache = {};
    redrawers.forEach(function (f) { f(); });
  }

  // ---------------------------------------------------------------- the recording page
  function recordingPage(app, R) {
    var H = R.header, S = R.summary;
    document.getElementById("subtitle").textContent = "recording of pid " + H.pid;
    app.appendChild(el("section", { id: "overview" }, [
      el("h1", { text: H.mode === "attach" ? "Attached to pid " + H.pid : "pid " + H.pid + ": " + H.command }),
      el("p", { cls: "lead", text: "JDK " + (H.java_version || "?") + " on Linux " + H.kernel + " (" + H.cpus + " CPUs); started " + H.start_wall +
        "; " + fmtNs(H.recorded_s * 1e9) + " recorded; a stall is a heartbeat late by " + fmtNs(H.threshold_ns) +
        "; threads sampled every " + fmtNs(H.sample_interval_ns) + " during stalls" + (H.tracepoints ? "; tracepoints on" : "") + "." }),
      H.pod ? el("p", { cls: "lead", text: "In " + H.pod + "." }) : null,
      cards(R)
    ]));
    if (R.notes.length) {
      app.appendChild(el("section", { id: "notes" }, [el("h2", { text: "Notes" }), el("ul", null, R.notes.map(function (n) { return el("li", { text: n }); }))]));
    }
    var drill = drilldown(R);
    app.appendChild(timeline(R, function (stall) { drill.select(stall); }));
    app.appendChild(percentilePlot(R));
    app.appendChild(drill.section);
    app.appendChild(opsTable(R));
  }

  function cards(R) {
    var S = R.summary;
    var items = [
      ["stalls", S.stalls, "of " + fmtNs(R.header.threshold_ns) + " or more"],
      ["longest stall", fmtNs(S.longest_stall_ns), ""],
      ["safepoints", fmtNum(S.safepoints), "stopped " + fmtNs(S.total_stopped_ns) + (S.recorded_ns > 0 ? " (" + (100 * S.total_stopped_ns / S.recorded_ns).toFixed(2) + "% of the time)" : "")],
      ["longest TTSP", fmtNs(S.ttsp_max_ns), "time to safepoint"],
      ["hiccups p99 / max", S.hiccups ? fmtNs(S.hiccups.p99_ns) + " / " + fmtNs(S.hiccups.max_ns) : "–", "the agent's meter"],
      ["control p99 / max", S.control ? fmtNs(S.control.p99_ns) + " / " + fmtNs(S.control.max_ns) : "–", "stallscope's own wake-ups"]
    ];
    Object.keys(S.by_cause).forEach(function (c) { items.push([c, S.by_cause[c], "stalls with this main cause"]); });
    return el("div", { cls: "cards" }, items.map(function (it) {
      return el("div", { cls: "card" }, [el("div", { cls: "k", text: it[0] }), el("div", { cls: "v", text: String(it[1]) }), el("div", { cls: "k", text: it[2] })]);
    }));
  }

  function timeline(R, onStall) {
    var sp = R.safepoints, hi = R.hiccups, co = R.control, sy = R.system, stalls = R.stalls;
    var end = Math.max(R.header.recorded_s, 0.001);
    function lastOf(a, add) { return a.length ? a[a.length - 1] + (add || 0) : 0; }
    end = Math.max(end, lastOf(hi.t, hi.len.length ? hi.len[hi.len.length - 1] : 0), lastOf(sp.t), lastOf(sy.tlb_per_s.t));
    stalls.forEach(function (s) { end = Math.max(end, s.t + s.duration_ns / 1e9); });
    var view = { a: 0, b: end };
    var logY = false;
    var canvas = el("canvas", { role: "img", "aria-label": "timeline of hiccups, safepoints and system signals" });
    var tip = el("div", { cls: "tooltip" });
    var chart = el("div", { cls: "chart" }, [canvas, tip]);
    var LEFT = 64, RIGHT = 12, AXIS = 34;
    var tracks = [
      { name: "hiccups", unit: "ms", h: 124, kind: "hiccups" },
      { name: "safepoints", unit: "ms", h: 124, kind: "safepoints" },
      { name: "CPU pressure", unit: "% of time", h: 84, kind: "cpu" },
      { name: "run-queue wait", unit: "ms/s", h: 84, kind: "rundelay" },
      { name: "TLB shootdowns", unit: "per s", h: 84, kind: "tlb" }
    ];
    var GAP = 10;
    var totalH = tracks.reduce(function (a, t) { return a + t.h + GAP; }, 0) + AXIS;
    var drawnSafepoints = 0;

    function xOf(t, w) { return LEFT + (t - view.a) / (view.b - view.a) * (w - LEFT - RIGHT); }
    function tOf(x, w) { return view.a + (x - LEFT) / (w - LEFT - RIGHT) * (view.b - view.a); }

    function yScale(max, top, h) {
      if (logY) {
        var lo = 0.01, hiV = Math.max(max, lo * 10);
        return { f: function (v) { return top + h - (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hiV) - Math.log10(lo)) * h; }, max: hiV, lo: lo };
      }
      return { f: function (v) { return top + h - (v / max) * h; }, max: max, lo: 0 };
    }
    function axisY(ctx, top, h, sc, unit, name) {
      ctx.strokeStyle = css("grid");
      ctx.fillStyle = css("muted");
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      var vals;
      if (logY) {
        vals = [];
        for (var p = Math.ceil(Math.log10(sc.lo)); p <= Math.log10(sc.max); p++) vals.push(Math.pow(10, p));
      } else vals = ticks(0, sc.max, 3).values;
      vals.forEach(function (v) {
        var y = sc.f(v);
        if (y < top - 1 || y > top + h + 1) return;
        ctx.beginPath(); ctx.moveTo(LEFT, y); ctx.lineTo(ctx.canvas.clientWidth - RIGHT, y); ctx.stroke();
        ctx.fillText(fmtNum(v), LEFT - 4, y);
      });
      ctx.textAlign = "left";
      ctx.textBaseline = "bottom";
      ctx.fillStyle = css("fg");
      ctx.font = "bold 11px system-ui, sans-serif";
      ctx.fillText(name + " (" + unit + ")", LEFT, top - 2);
      ctx.font = "11px system-ui, sans-serif";
    }
    function visibleRange(arr) {
      return [Math.max(0, lowerBound(arr, view.a) - 1), Math.min(arr.length, lowerBound(arr, view.b) + 1)];
    }

    function drawHiccups(ctx, w, top, h) {
      var r = visibleRange(hi.t), max = 0.1;
      for (var i = r[0]; i < r[1]; i++) max = Math.max(max, hi.max_ns[i] / 1e6);
      var rc = visibleRange(co.t);
      for (var j = rc[0]; j < rc[1]; j++) max = Math.max(max, co.max_ns[j] / 1e6);
      var sc = yScale(max * 1.1, top, h);
      axisY(ctx, top, h, sc, "ms", "hiccups, max per interval");
      // Intervals narrower than a pixel share it: each column shows its largest.
      var bars = binned(hi.t, hi.len, hi.max_ns, r, w);
      ctx.fillStyle = css("hiccup");
      bars.forEach(function (b) {
        var y = sc.f(b[2] / 1e6);
        ctx.globalAlpha = 0.35;
        ctx.fillRect(b[0], y, b[1] - b[0], top + h - y);
        ctx.globalAlpha = 1;
        ctx.fillRect(b[0], y, b[1] - b[0], 2);
      });
      ctx.strokeStyle = css("control");
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      binned(co.t, co.len, co.max_ns, rc, w).forEach(function (b, k) {
        var yc = sc.f(b[2] / 1e6);
        if (k === 0) ctx.moveTo(b[0], yc); else ctx.lineTo(b[0], yc);
        ctx.lineTo(b[1], yc);
      });
      ctx.stroke();
      ctx.lineWidth = 1;
    }
    // [x0, x1, max] per drawn bar: one per interval when they are wide, one per pixel column
    // (the largest in it) when they are not.
    function binned(t, len, v, r, w) {
      var out = [], cur = null;
      for (var i = r[0]; i < r[1]; i++) {
        var x0 = xOf(t[i], w), x1 = Math.max(x0 + 1, xOf(t[i] + len[i], w) - 0.5);
        if (cur && Math.floor(x0) <= Math.floor(cur[0]) + 1 && x1 - x0 < 2) {
          cur[1] = Math.max(cur[1], x1);
          cur[2] = Math.max(cur[2], v[i]);
          continue;
        }
        cur = [x0, x1, v[i]];
        out.push(cur);
      }
      return out;
    }
    function drawSafepoints(ctx, w, top, h) {
      var r = visibleRange(sp.t);
      var plotW = w - LEFT - RIGHT;
      // One bar per pixel column: the longest safepoint that starts in it, TTSP below, the
      // operation stacked on top. 100,000 safepoints cost one pass.
      var bins = new Int32Array(Math.ceil(plotW) + 1).fill(-1);
      var max = 0.1;
      for (var i = r[0]; i < r[1]; i++) {
        var x = Math.floor(xOf(sp.t[i], w) - LEFT);
        if (x < 0 || x > plotW) continue;
        var b = bins[x];
        if (b < 0 || sp.total_ns[i] > sp.total_ns[b]) bins[x] = i;
        max = Math.max(max, sp.total_ns[i] / 1e6);
      }
      var sc = yScale(max * 1.1, top, h);
      axisY(ctx, top, h, sc, "ms", "safepoints: TTSP + at");
      var ttspC = css("ttsp"), atC = css("at");
      drawnSafepoints = 0;
      for (var k = 0; k < bins.length; k++) {
        var idx = bins[k];
        if (idx < 0) continue;
        drawnSafepoints++;
        var tt = sp.ttsp_ns[idx] / 1e6, at = (sp.total_ns[idx] - sp.ttsp_ns[idx]) / 1e6;
        var yBase = top + h, yT = sc.f(tt), yA = sc.f(tt + Math.max(at, 0));
        // As wide as it lasted once zoomed in far enough, else one column.
        var x0 = xOf(sp.t[idx], w), bw = Math.max(1.5, xOf(sp.t[idx] + sp.total_ns[idx] / 1e9, w) - x0);
        ctx.fillStyle = ttspC;
        ctx.fillRect(x0, yT, bw, yBase - yT);
        ctx.fillStyle = atC;
        ctx.fillRect(x0, yA, bw, yT - yA);
      }
    }
    function drawLines(ctx, w, top, h, series, name, unit, fixedMax) {
      var max = fixedMax || 0, any = false;
      series.forEach(function (s) {
        var r = visibleRange(s.p.t);
        s.r = r;
        for (var i = r[0]; i < r[1]; i++) { any = true; if (!fixedMax) max = Math.max(max, s.p.v[i]); }
      });
      max = max > 0 ? max * (fixedMax ? 1 : 1.1) : 1;
      var sc = yScale(max, top, h);
      axisY(ctx, top, h, sc, unit, name);
      series.forEach(function (s) {
        ctx.strokeStyle = css(s.color);
        ctx.fillStyle = css(s.color);
        ctx.lineWidth = 1.3;
        ctx.beginPath();
        // Many points per pixel column: draw the column's range as one vertical stroke.
        var col = null, lo = 0, hiV = 0;
        function flush() {
          if (col === null) return;
          ctx.lineTo(col, sc.f(lo));
          if (hiV !== lo) ctx.lineTo(col, sc.f(hiV));
        }
        for (var i = s.r[0]; i < s.r[1]; i++) {
          var x = Math.round(xOf(s.p.t[i], w)), v = s.p.v[i];
          if (x === col) { lo = Math.min(lo, v); hiV = Math.max(hiV, v); continue; }
          flush();
          if (col === null) ctx.moveTo(x, sc.f(v));
          col = x; lo = v; hiV = v;
        }
        flush();
        ctx.stroke();
        if (s.r[1] - s.r[0] === 1) ctx.fillRect(xOf(s.p.t[s.r[0]], w) - 2, sc.f(s.p.v[s.r[0]]) - 2, 4, 4);
      });
      ctx.lineWidth = 1;
      if (!any) {
        ctx.fillStyle = css("muted");
        ctx.textAlign = "left";
        ctx.textBaseline = "middle";
        ctx.fillText("no samples in view", LEFT + 8, top + h / 2);
      }
    }

    function draw() {
      var g = setup(canvas, totalH), ctx = g.ctx, w = g.w;
      var top = 4;
      var plotBottom = totalH - AXIS;
      // Stalls first, as bands under the data.
      stalls.forEach(function (s) {
        var xa = xOf(s.t, w), xb = Math.max(xa + 2, xOf(s.t + s.duration_ns / 1e9, w));
        if (xb < LEFT || xa > w - RIGHT) return;
        ctx.fillStyle = css("stall");
        ctx.fillRect(Math.max(xa, LEFT), 0, Math.min(xb, w - RIGHT) - Math.max(xa, LEFT), plotBottom);
        ctx.fillStyle = causeColor(s.cause);
        ctx.fillRect(Math.max(xa, LEFT), plotBottom - 5, Math.max(2, Math.min(xb, w - RIGHT) - Math.max(xa, LEFT)), 5);
      });
      tracks.forEach(function (t) {
        t.top = top;
        top += 14;
        var th = t.h - 14;
        if (t.kind === "hiccups") drawHiccups(ctx, w, top, th);
        else if (t.kind === "safepoints") drawSafepoints(ctx, w, top, th);
        else if (t.kind === "cpu") drawLines(ctx, w, top, th, [{ p: sy.steal_pct, color: "steal" }, { p: sy.psi_cpu_pct, color: "psi" }], "CPU: steal, PSI cpu some", "% of time", 100);
        else if (t.kind === "rundelay") drawLines(ctx, w, top, th, [{ p: sy.run_delay_ms_per_s, color: "rundelay" }], "the JVM's run-queue wait", "ms per s");
        else drawLines(ctx, w, top, th, [{ p: sy.tlb_per_s, color: "tlb" }], "TLB shootdowns", "per s");
        top += th + GAP;
      });
      // Time axis.
      ctx.strokeStyle = css("axis");
      ctx.beginPath(); ctx.moveTo(LEFT, plotBottom); ctx.lineTo(w - RIGHT, plotBottom); ctx.stroke();
      var tk = timeTicks(view.a, view.b, Math.max(3, Math.floor((w - LEFT) / 110)));
      ctx.fillStyle = css("muted");
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      tk.values.forEach(function (v) {
        var x = xOf(v, w);
        ctx.beginPath(); ctx.moveTo(x, plotBottom); ctx.lineTo(x, plotBottom + 4); ctx.stroke();
        ctx.fillText(fmtSecs(v, tk.step), x, plotBottom + 6);
      });
      ctx.fillStyle = css("fg");
      ctx.fillText("time since the recording began (" + (tk.step >= 60 ? "hours and minutes" : "s") + ")", LEFT + (w - LEFT) / 2, plotBottom + 19);
      canvas.dataset.ink = String(ink(canvas));
      section.dataset.drawnSafepoints = String(drawnSafepoints);
      section.dataset.viewFrom = view.a.toFixed(6);
      section.dataset.viewTo = view.b.toFixed(6);
    }

    function zoom(factor, centre) {
      var span = (view.b - view.a) * factor;
      span = Math.min(Math.max(span, 1e-4), end * 1.05 + 1e-3);
      var c = centre === undefined ? (view.a + view.b) / 2 : centre;
      var frac = (c - view.a) / (view.b - view.a);
      view.a = c - frac * span;
      view.b = view.a + span;
      clamp();
      draw();
    }
    function clamp() {
      var span = view.b - view.a;
      if (view.a < 0) { view.a = 0; view.b = span; }
      if (view.b > end * 1.05 + 1e-3) { view.b = end * 1.05 + 1e-3; view.a = Math.max(0, view.b - span); }
    }
    function showStall(s) {
      var pad = Math.max(s.duration_ns / 1e9 * 3, 0.05);
      view.a = Math.max(0, s.t - pad);
      view.b = s.t + s.duration_ns / 1e9 + pad;
      clamp();
      draw();
    }
    canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      var rect = canvas.getBoundingClientRect();
      zoom(e.deltaY > 0 ? 1.25 : 0.8, tOf(e.clientX - rect.left, rect.width));
    }, { passive: false });
    var drag = null;
    canvas.addEventListener("mousedown", function (e) { drag = { x: e.clientX, a: view.a, b: view.b, moved: false }; });
    window.addEventListener("mouseup", function (e) {
      if (drag && !drag.moved) {
        var rect = canvas.getBoundingClientRect();
        var t = tOf(e.clientX - rect.left, rect.width);
        var hit = stallAt(t, rect.width);
        if (hit) onStall(hit);
      }
      drag = null;
    });
    function stallAt(t, w) {
      var tol = (view.b - view.a) / (w - LEFT - RIGHT) * 3;
      var best = null;
      stalls.forEach(function (s) {
        if (t >= s.t - tol && t <= s.t + s.duration_ns / 1e9 + tol && (!best || s.duration_ns > best.duration_ns)) best = s;
      });
      return best;
    }
    canvas.addEventListener("mousemove", function (e) {
      var rect = canvas.getBoundingClientRect();
      var x = e.clientX - rect.left, y = e.clientY - rect.top;
      if (drag) {
        var dt = (x - (drag.x - rect.left)) / (rect.width - LEFT - RIGHT) * (drag.b - drag.a);
        if (Math.abs(e.clientX - drag.x) > 2) drag.moved = true;
        view.a = drag.a - dt; view.b = drag.b - dt;
        clamp();
        draw();
        return;
      }
      if (x < LEFT) { tip.style.display = "none"; return; }
      var t = tOf(x, rect.width);
      var lines = ["t = " + t.toFixed(3) + " s"];
      var i = lowerBound(hi.t, t) - 1;
      if (i >= 0 && t <= hi.t[i] + hi.len[i]) lines.push("hiccup max " + fmtNs(hi.max_ns[i]) + " in [" + hi.t[i].toFixed(1) + " s, +" + hi.len[i].toFixed(1) + " s]");
      var k = lowerBound(co.t, t) - 1;
      if (k >= 0 && t <= co.t[k] + co.len[k]) lines.push("control max " + fmtNs(co.max_ns[k]));
      var tol = (view.b - view.a) / (rect.width - LEFT - RIGHT) * 2;
      var j0 = lowerBound(sp.t, t - tol), best = -1;
      for (var j = j0; j < sp.t.length && sp.t[j] <= t + tol; j++) if (best < 0 || sp.total_ns[j] > sp.total_ns[best]) best = j;
      if (best >= 0) lines.push("safepoint \"" + sp.ops[sp.op[best]] + "\": TTSP " + fmtNs(sp.ttsp_ns[best]) + ", at safepoint " + fmtNs(sp.at_ns[best]));
      function near(p) {
        var m = lowerBound(p.t, t);
        return m < p.t.length && p.t[m] - t < 1.5 ? p.v[m] : null;
      }
      var sysLine = [["steal", sy.steal_pct, "%"], ["PSI cpu", sy.psi_cpu_pct, "%"], ["run-queue wait", sy.run_delay_ms_per_s, " ms/s"], ["TLB", sy.tlb_per_s, "/s"]]
        .map(function (x) { var v = near(x[1]); return v === null ? null : x[0] + " " + fmtNum(v) + x[2]; }).filter(Boolean);
      if (sysLine.length) lines.push(sysLine.join(", "));
      var s = stallAt(t, rect.width);
      if (s) lines.push("STALL " + s.stall + ": " + fmtNs(s.duration_ns) + ", " + s.title + " (click for the drill-down)");
      tip.textContent = lines.join("\n");
      tip.style.display = "block";
      tip.style.left = Math.min(x + 14, rect.width - 360) + "px";
      tip.style.top = (y + 14) + "px";
      canvas.style.cursor = s ? "pointer" : "crosshair";
    });
    canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    canvas.addEventListener("dblclick", function () { view.a = 0; view.b = end; draw(); });
    var order = stalls.slice().sort(function (a, b) { return a.t - b.t; });
    var cursor = -1;
    function step(d) {
      if (!order.length) return;
      cursor = (cursor + d + order.length) % order.length;
      showStall(order[cursor]);
      onStall(order[cursor]);
    }
    var legend = el("div", { cls: "legend" }, [
      leg("hiccup", "hiccup: the agent's max per interval"), leg("control", "control: stallscope's own wake-ups"),
      leg("ttsp", "time to safepoint (TTSP)"), leg("at", "at safepoint (the VM operation)"),
      leg("steal", "steal"), leg("psi", "PSI cpu some"), leg("rundelay", "the JVM's run-queue wait"), leg("tlb", "TLB shootdowns"),
      el("span", null, [el("i", { style: "background:" + css("stall") + ";border:1px solid " + css("stall-edge") }), "a stall (colour below: its cause)"])
    ]);
    function leg(v, text) { return el("span", null, [el("i", { style: "background:" + css(v) }), text]); }
    var section = el("section", { id: "timeline", "data-safepoints": String(sp.t.length), "data-stalls": String(stalls.length), "data-intervals": String(hi.t.length) }, [
      el("h2", { text: "Timeline" }),
      el("div", { cls: "toolbar" }, [
        el("button", { type: "button", onclick: function () { zoom(0.5); }, text: "zoom in" }),
        el("button", { type: "button", onclick: function () { zoom(2); }, text: "zoom out" }),
        el("button", { type: "button", onclick: function () { view.a = 0; view.b = end; draw(); }, text: "whole recording" }),
        el("button", { type: "button", onclick: function () { step(-1); }, text: "◀ stall" }),
        el("button", { type: "button", onclick: function () { step(1); }, text: "stall ▶" }),
        el("button", { type: "button", onclick: function (e) { logY = !logY; e.target.textContent = logY ? "linear y" : "log y"; draw(); }, text: "log y" }),
        el("span", { cls: "hint", text: "wheel to zoom, drag to pan, double-click for all; click a stall to explain it" })
      ]),
      chart, legend
    ]);
    redrawers.push(draw);
    section.draw = draw;
    section.showStall = showStall;
    timelineApi = section;
    return section;
  }
  var timelineApi = null;

  function percentilePlot(R) {
    var P = R.percentiles;
    var series = [
      { name: "hiccups (the agent's meter)", pts: P.hiccups, color: "hiccup" },
      { name: "time to safepoint (TTSP)", pts: P.ttsp, color: "ttsp" },
      { name: "control (stallscope's own wake-ups)", pts: P.control, color: "control" }
    ].filter(function (s) { return s.pts.length > 0; });
    var canvas = el("canvas", { role: "img", "aria-label": "percentile distribution plot" });
    var logY = false;
    function xv(p) { return Math.log10(1 / (1 - Math.min(p, 99.9999) / 100)); }
    function draw() {
      var g = setup(canvas, 320), ctx = g.ctx, w = g.w, h = g.h;
      var L = 70, Rm = 16, T = 10, B = 44;
      var maxX = 2, maxY = 0.01;
      series.forEach(function (s) {
        s.pts.forEach(function (p) { maxX = Math.max(maxX, xv(p[0])); maxY = Math.max(maxY, p[1] / 1e6); });
      });
      maxX = Math.ceil(maxX);
      var minY = 0.001;
      function X(p) { return L + xv(p) / maxX * (w - L - Rm); }
      function Y(v) {
        if (logY) return T + (h - T - B) * (1 - (Math.log10(Math.max(v, minY)) - Math.log10(minY)) / (Math.log10(maxY * 1.2) - Math.log10(minY)));
        return T + (h - T - B) * (1 - v / (maxY * 1.1));
      }
      ctx.strokeStyle = css("grid");
      ctx.fillStyle = css("muted");
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      for (var d = 0; d <= maxX; d++) {
        var pct = 100 * (1 - Math.pow(10, -d));
        var x = L + d / maxX * (w - L - Rm);
        ctx.beginPath(); ctx.moveTo(x, T); ctx.lineTo(x, h - B); ctx.stroke();
        ctx.textAlign = d === maxX ? "right" : "center";
        ctx.fillText(d === 0 ? "0%" : pct.toFixed(Math.max(0, d - 2)) + "%", x, h - B + 4);
      }
      ctx.fillStyle = css("fg");
      ctx.textAlign = "center";
      ctx.fillText("percentile (log scale of 1/(1−p), as HdrHistogram plots it)", L + (w - L) / 2, h - B + 20);
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillStyle = css("muted");
      var yt = logY ? [] : ticks(0, maxY * 1.1, 5).values;
      if (logY) for (var e = Math.ceil(Math.log10(minY)); e <= Math.log10(maxY * 1.2); e++) yt.push(Math.pow(10, e));
      yt.forEach(function (v) {
        var y = Y(v);
        ctx.beginPath(); ctx.moveTo(L, y); ctx.lineTo(w - Rm, y); ctx.stroke();
        ctx.fillText(fmtNum(v), L - 5, y);
      });
      ctx.save(); ctx.translate(14, T + (h - T - B) / 2); ctx.rotate(-Math.PI / 2); ctx.textAlign = "center"; ctx.fillStyle = css("fg");
      ctx.fillText("latency (ms)", 0, 0); ctx.restore();
      series.forEach(function (s) {
        ctx.strokeStyle = css(s.color);
        ctx.lineWidth = 2;
        ctx.beginPath();
        s.pts.forEach(function (p, i) {
          var x = X(p[0]), y = Y(p[1] / 1e6);
          if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
        });
        ctx.stroke();
      });
      ctx.lineWidth = 1;
      if (!series.length) {
        ctx.fillStyle = css("muted"); ctx.textAlign = "center";
        ctx.fillText("no hiccup, safepoint or control data in this recording", w / 2, h / 2);
      }
      canvas.dataset.ink = String(ink(canvas));
    }
    var section = el("section", { id: "percentiles", "data-series": String(series.length) }, [
      el("h2", { text: "Percentiles" }),
      el("div", { cls: "toolbar" }, [
        el("button", { type: "button", onclick: function (e) { logY = !logY; e.target.textContent = logY ? "linear y" : "log y"; draw(); }, text: "log y" }),
        el("span", { cls: "hint", text: "the JVM's hiccups and its times to safepoint against stallscope's own control meter: where they part, the JVM stalled and the machine did not" })
      ]),
      el("div", { cls: "chart" }, [canvas]),
      el("div", { cls: "legend" }, series.map(function (s) {
        var last = s.pts[s.pts.length - 1];
        return el("span", null, [el("i", { style: "background:" + css(s.color) }), s.name + " — max " + fmtNs(last[1]) + ", " + s.pts.length + " points"]);
      }))
    ]);
    redrawers.push(draw);
    return section;
  }

  function parseRle(s) {
    var out = [], re = /([A-Za-z.])(\d+)/g, m;
    while ((m = re.exec(s)) !== null) out.push([m[1], parseInt(m[2], 10)]);
    return out;
  }
  var STATE_WORDS = { R: "running or runnable", S: "sleeping", D: "uninterruptible (disk, fault)", T: "stopped", t: "traced", Z: "zombie", I: "idle", X: "dead", ".": "not present" };
  function stateColor(c) {
    if (c === "R" || c === "S" || c === "D" || c === "T" || c === "Z") return css(c);
    if (c === "t") return css("T");
    if (c === ".") return null;
    return css("other");
  }

  function drilldown(R) {
    var stalls = R.stalls;
    var withStrips = stalls.filter(function (s) { return s.strips; }).length;
    var detail = el("div", { id: "stall-detail" });
    var current = null;
    var canvas = el("canvas", { role: "img", "aria-label": "thread states across the stall" });
    var table = sortableTable([
      { label: "#", key: "stall", num: true },
      { label: "started", key: "start_wall" },
      { label: "duration", key: "duration_ns", num: true, fmt: fmtNs },
      { label: "safepoint", key: "op", fmt: function (v) { return v || "— (outside any)"; } },
      { label: "TTSP", key: "ttsp", num: true, fmt: function (v) { return v > 0 ? fmtNs(v) : "–"; } },
      { label: "cause", key: "title" },
      { label: "confidence", key: "confidence" },
      { label: "culprit", key: "culprit" },
      { label: "who set it off", key: "who" }
    ], stalls.map(function (s) {
      var f = s.findings[0] || { culprits: [] };
      return {
        stall: s.stall, start_wall: s.start_wall, duration_ns: s.duration_ns, op: s.safepoint ? s.safepoint.op : "",
        ttsp: s.safepoint ? s.safepoint.ttsp_ns : 0, title: s.title, confidence: s.confidence,
        culprit: f.culprits.map(function (c) { return c.name; }).join(", "),
        who: f.instigator ? f.instigator.name : "", ref: s
      };
    }), { sortKey: "duration_ns", desc: true, onRow: function (r) { select(r.ref); if (timelineApi) timelineApi.showStall(r.ref); }, rowId: function (r) { return String(r.stall); } });

    function select(s) {
      current = s;
      Array.prototype.forEach.call(table.querySelectorAll("tbody tr"), function (tr) { tr.classList.toggle("selected", tr.dataset.id === String(s.stall)); });
      detail.textContent = "";
      var sp = s.safepoint;
      detail.appendChild(el("h3", { text: "Stall " + s.stall + " at " + s.start_wall + ": " + fmtNs(s.duration_ns) + (sp ? " — safepoint \"" + sp.op + "\": reaching " + fmtNs(sp.ttsp_ns) + " (TTSP), at safepoint " + fmtNs(sp.at_safepoint_ns) : " — a hiccup outside any safepoint") }));
      s.findings.forEach(function (f, i) {
        var box = el("div", { cls: "finding" + (i === 0 ? " main" : "") }, [
          el("div", null, [el("span", { cls: "cause-dot", "data-colour": causeVar(f.cause), style: "background:" + causeColor(f.cause) }), el("strong", { text: (i === 0 ? "cause: " : "also: ") + f.title + " " }),
            el("span", { cls: "badge " + f.confidence, text: f.confidence + " confidence" }), f.share > 0 ? el("span", { cls: "muted", text: "  " + Math.round(f.share * 100) + "% of the stall" }) : null])
        ]);
        if (f.culprits.length) {
          box.appendChild(el("ul", null, f.culprits.map(function (c) {
            var code = null;
            if (c.code) {
              // Its Java stack as a stack trace prints it, the application's frame in bold.
              code = el("div", { cls: "code" }, [el("div", { cls: "muted", text: "code: " + c.code.source }),
                el("pre", { cls: "mono stack" }, c.code.frames.slice(0, 8).map(function (fr, k) {
                  var line = "at " + fr.method + (fr.line ? " (line " + fr.line + (fr.kind ? ", " + fr.kind : "") + ")" : (fr.kind ? " (" + fr.kind + ")" : "")) + "\n";
                  return k === c.code.app_frame ? el("strong", { text: line }) : el("span", { text: line });
                }))]);
            }
            return el("li", null, [el("span", { cls: "culprit", text: "culprit \"" + c.name + "\" (tid " + c.tid + ")" }), ": " + c.description +
              (c.module ? "; pc in " + c.module : "") + (c.files.length ? "; files " + c.files.join(", ") : "") + (c.named_by_safepoint_timeout ? "; named by SafepointTimeout" : ""), code]);
          })));
        }
        box.appendChild(el("ul", null, f.evidence.map(function (e) { return el("li", { text: e }); })));
        var w = f.instigator;
        if (w) {
          // Who set it off: what they did, their process or thread, and a Java thread's stack.
          var facts = [w.command ? "command: " + w.command : null, w.user ? "user " + w.user : null,
            w.parents.length ? "parents: " + w.parents.join(", ") : null, w.container ? "container " + w.container : (w.cgroup ? "cgroup " + w.cgroup : null),
            w.address ? "from " + w.address : null].filter(Boolean);
          box.appendChild(el("div", { cls: "who", "data-kind": w.kind }, [el("strong", { text: "who: " }), w.did,
            facts.length ? el("div", { cls: "muted", text: facts.join("; ") }) : null,
            w.java_stack.length ? el("pre", { cls: "mono stack" }, w.java_stack.slice(0, 8).map(function (fr) { return el("span", { text: "at " + fr + "\n" }); })) : null,
            el("div", { cls: "muted", text: "how we know: " + w.source })]));
        }
        box.appendChild(el("div", { cls: "fix" }, [el("strong", { text: "fix: " }), f.fix + " ", el("span", { cls: "muted mono", text: "(" + f.doc + ")" })]));
        if (w && w.fix && w.fix !== f.fix) {
          box.appendChild(el("div", { cls: "fix" }, [el("strong", { text: "fix too: " }), w.fix]));
        }
        detail.appendChild(box);
      });
      if (sp && sp.timeout_culprits.length) {
        detail.appendChild(el("p", { text: "SafepointTimeout named " + sp.timeout_culprits.map(function (c) { return "\"" + c.name + "\"" + (c.state ? " (" + c.state + ")" : ""); }).join(", ") + "." }));
      }
      detail.appendChild(el("p", { cls: "muted", text: s.parked_threads + " of " + s.threads + " threads were parked in the kernel throughout; " + s.samples + " samples; stallscope's control meter was late at most " + fmtNs(s.control_max_late_ns) + " during it" + (s.target_exited ? "; the JVM exited before the stall ended" : "") + "." }));
      detail.appendChild(el("div", { cls: "chart" }, [canvas]));
      detail.appendChild(el("div", { cls: "legend" }, ["R", "S", "D", "T", "Z"].map(function (c) {
        return el("span", null, [el("i", { style: "background:" + stateColor(c) }), c + " " + STATE_WORDS[c]]);
      }).concat([el("span", null, [el("i", { style: "background:" + css("culprit-bg") + ";border:1px solid " + css("D") }), "culprit"])])));
      drawStrips();
      section.dataset.selected = String(s.stall);
    }
    function drawStrips() {
      var s = current;
      if (!s) return;
      var st = s.strips;
      if (!st) {
        var g0 = setup(canvas, 40);
        g0.ctx.fillStyle = css("muted");
        g0.ctx.fillText(s.samples ? "per-thread strips are kept for the " + 200 + " longest stalls only" : "no thread samples were taken during this stall", 10, 20);
        section.dataset.rows = "0";
        section.dataset.culpritRows = "0";
        return;
      }
      var ROW = 15, L = 230, Rm = 12, T = 20, B = 36;
      var rows = st.rows;
      var h = T + rows.length * ROW + (st.parked_not_drawn ? ROW : 0) + B;
      var g = setup(canvas, h), ctx = g.ctx, w = g.w;
      var tEnd = Math.max(s.duration_ns / 1e6, st.t_ms.length ? st.t_ms[st.t_ms.length - 1] : 0) * 1.02 + 0.5;
      var tStart = Math.min(0, st.t_ms.length ? st.t_ms[0] : 0, s.safepoint_offset_ms === null ? 0 : s.safepoint_offset_ms);
      function X(ms) { return L + (ms - tStart) / (tEnd - tStart) * (w - L - Rm); }
      // The safepoint: TTSP, then the operation.
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      ctx.fillStyle = css("muted");
      ctx.fillText(s.safepoint ? "safepoint" : "no safepoint", L - 6, 9);
      if (s.safepoint && s.safepoint_offset_ms !== null) {
        var a = s.safepoint_offset_ms, b = a + s.safepoint.ttsp_ns / 1e6, c2 = b + s.safepoint.at_safepoint_ns / 1e6;
        ctx.fillStyle = css("ttsp"); ctx.fillRect(X(a), 3, Math.max(1, X(b) - X(a)), 12);
        ctx.fillStyle = css("at"); ctx.fillRect(X(b), 3, Math.max(2, X(c2) - X(b)), 12);
        ctx.fillStyle = "#fff"; ctx.textAlign = "left";
        if (X(b) - X(a) > 200) ctx.fillText("reaching the safepoint (TTSP) " + fmtNs(s.safepoint.ttsp_ns), X(a) + 4, 9);
      }
      ctx.fillStyle = css("stall-edge");
      ctx.fillRect(X(0), T - 4, 1, rows.length * ROW + 4);
      ctx.fillRect(X(s.duration_ns / 1e6), T - 4, 1, rows.length * ROW + 4);
      ctx.textBaseline = "middle";
      var culpritRows = 0;
      rows.forEach(function (r, i) {
        var y = T + i * ROW;
        if (r.culprit) {
          culpritRows++;
          ctx.fillStyle = css("culprit-bg");
          ctx.fillRect(0, y, w, ROW);
        }
        ctx.fillStyle = css("fg");
        ctx.textAlign = "right";
        ctx.font = (r.culprit ? "bold " : "") + "11px system-ui, sans-serif";
        var label = r.name.length > 30 ? r.name.slice(0, 29) + "…" : r.name;
        ctx.fillText(label + " " + r.tid, L - 6, y + ROW / 2);
        var runs = parseRle(r.states), k = 0;
        runs.forEach(function (run) {
          var col = stateColor(run[0]);
          var i0 = k, i1 = k + run[1];
          k = i1;
          if (!col) return;
          var xa = X(st.t_ms[i0]), xb = i1 < st.t_ms.length ? X(st.t_ms[i1]) : X(Math.min(tEnd, st.t_ms[st.t_ms.length - 1] + s.duration_ns / 1e6 / Math.max(1, st.t_ms.length)));
          ctx.fillStyle = col;
          ctx.fillRect(xa, y + 2, Math.max(1, xb - xa), ROW - 4);
        });
      });
      ctx.font = "11px system-ui, sans-serif";
      if (st.parked_not_drawn) {
        ctx.fillStyle = css("muted"); ctx.textAlign = "left";
        ctx.fillText("+ " + st.parked_not_drawn + " more threads, parked throughout (not drawn)", L, T + rows.length * ROW + ROW / 2);
      }
      var base = h - B + 4;
      ctx.strokeStyle = css("axis");
      ctx.beginPath(); ctx.moveTo(L, base); ctx.lineTo(w - Rm, base); ctx.stroke();
      var tk = ticks(tStart, tEnd, Math.max(3, Math.floor((w - L) / 90)));
      ctx.fillStyle = css("muted"); ctx.textAlign = "center"; ctx.textBaseline = "top";
      tk.values.forEach(function (v) { var x = X(v); ctx.fillText(fmtNum(v), x, base + 3); });
      ctx.fillStyle = css("fg");
      ctx.fillText("ms since the stall began (the meter's missed tick); each column is one sample", L + (w - L) / 2, base + 17);
      canvas.dataset.ink = String(ink(canvas));
      section.dataset.rows = String(rows.length);
      section.dataset.culpritRows = String(culpritRows);
    }
    var section = el("section", { id: "drilldown", "data-stalls": String(stalls.length), "data-with-strips": String(withStrips) }, [
      el("h2", { text: "Stalls" }),
      stalls.length ? el("p", { cls: "muted", text: "Longest first. Click a row for its threads, cause, evidence and fix." }) : el("p", { text: "No stalls of " + fmtNs(R.header.threshold_ns) + " or more: the JVM kept time throughout." }),
      stalls.length ? el("div", { cls: "tablewrap" }, [table]) : null,
      detail
    ]);
    redrawers.push(drawStrips);
    if (stalls.length) {
      var longest = stalls.reduce(function (a, b) { return b.duration_ns > a.duration_ns ? b : a; });
      select(longest);
    } else {
      section.dataset.rows = "0";
      section.dataset.culpritRows = "0";
    }
    return { section: section, select: function (s) { select(s); section.scrollIntoView({ behavior: "smooth", block: "start" }); } };
  }

  function opsTable(R) {
    var t = sortableTable([
      { label: "VM operation", key: "op" },
      { label: "count", key: "count", num: true, fmt: fmtNum },
      { label: "total", key: "total_ns", num: true, fmt: fmtNs },
      { label: "TTSP total", key: "ttsp_total_ns", num: true, fmt: fmtNs },
      { label: "TTSP max", key: "ttsp_max_ns", num: true, fmt: fmtNs },
      { label: "op max", key: "op_max_ns", num: true, fmt: fmtNs },
      { label: "max", key: "max_ns", num: true, fmt: fmtNs }
    ], R.ops, { sortKey: "total_ns", desc: true });
    return el("section", { id: "ops", "data-rows": String(R.ops.length) }, [
      el("h2", { text: "Safepoints by VM operation" }),
      R.ops.length ? el("div", { cls: "tablewrap" }, [t]) : el("p", { cls: "muted", text: "No safepoint log in this recording." })
    ]);
  }

  // ---------------------------------------------------------------- the lab page
  function quantile(sorted, q) {
    if (!sorted.length) return NaN;
    var pos = (sorted.length - 1) * q, lo = Math.floor(pos), hi = Math.ceil(pos);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
  }
  function labPage(app, L) {
    document.getElementById("subtitle").textContent = "lab run, " + L.profile + " profile";
    var E = L.environment;
    var matched = 0, graded = 0;
    L.scenarios.forEach(function (s) { s.variants.forEach(function (v) { v.runs.forEach(function (r) { if (r.grade) { graded++; if (r.grade.matched) matched++; } }); }); });
    app.appendChild(el("section", { id: "overview" }, [
      el("h1", { text: "stallscope lab: " + L.scenarios.length + " scenarios, " + L.reps + " repetitions, " + L.profile + " profile" }),
      el("p", { cls: "lead", text: "Started " + L.started + " on Linux " + E.kernel + ", " + E.cpus + " CPUs" + (E.root ? ", root" : "") + (E.fuse ? ", FUSE" : ", no FUSE") + "; Java " + E.java_version + " (" + E.java + "); " + fmtNs(L.elapsed_ms * 1e6) + " in all." }),
      el("div", { cls: "cards" }, [
        card("reproduced", L.scenarios.filter(function (s) { return s.verdict === "reproduced"; }).length + " of " + L.scenarios.length, "seeds whose effect we saw"),
        card("doctor", graded ? matched + " of " + graded : "–", "runs diagnosed with the known cause")
      ])
    ]));
    app.appendChild(el("section", { id: "verdicts" }, [el("h2", { text: "Verdicts" }), sortableTable([
      { label: "scenario", key: "id" }, { label: "seed", key: "seed" }, { label: "known cause", key: "cause" },
      { label: "verdict", key: "verdict" }, { label: "effect (baseline ÷ best mitigation)", key: "effect", num: true, fmt: function (v) { return v ? fmtNum(v) + "×" : "–"; } },
      { label: "reason", key: "reason" }
    ], L.scenarios.map(function (s) { return { id: s.id, seed: s.seed, cause: s.cause, verdict: s.verdict, effect: s.effect || 0, reason: s.reason }; }))]));
    var boxes = el("section", { id: "lab", "data-scenarios": String(L.scenarios.length) }, [el("h2", { text: "Baseline against mitigation, every repetition" })]);
    L.scenarios.forEach(function (s) { boxes.appendChild(scenarioCard(s)); });
    app.appendChild(boxes);
    app.appendChild(confusion(L));
  }
  function card(k, v, sub) {
    return el("div", { cls: "card" }, [el("div", { cls: "k", text: k }), el("div", { cls: "v", text: v }), el("div", { cls: "k", text: sub })]);
  }
  function scenarioCard(s) {
    var canvas = el("canvas", { cls: "boxplot", role: "img", "aria-label": s.id + " box plot" });
    var vals = s.variants.map(function (v) {
      return v.runs.map(function (r) { return r.metrics.metric; }).filter(function (x) { return typeof x === "number" && isFinite(x); }).sort(function (a, b) { return a - b; });
    });
    var all = [].concat.apply([], vals);
    var pub = s.published;
    [pub.baseline, pub.mitigation].forEach(function (x) { if (typeof x === "number") all.push(x); });
    var positive = all.filter(function (x) { return x > 0; });
    var logY = positive.length === all.length && positive.length > 1 && Math.max.apply(null, positive) / Math.min.apply(null, positive) > 30;
    function draw() {
      var g = setup(canvas, 260), ctx = g.ctx, w = g.w, h = g.h;
      var Lm = 80, Rm = 150, T = 12, B = 54;
      if (!all.length) {
        ctx.fillStyle = css("muted"); ctx.fillText(s.verdict === "skipped" ? "skipped: " + s.reason : "no measurements", Lm, h / 2);
        canvas.dataset.ink = String(ink(canvas));
        return;
      }
      var lo = Math.min.apply(null, all), hi = Math.max.apply(null, all);
      if (logY) { lo = Math.pow(10, Math.floor(Math.log10(lo))); hi = Math.pow(10, Math.ceil(Math.log10(hi))); }
      else { lo = Math.min(0, lo); hi = hi * 1.15 || 1; }
      function Y(v) {
        if (logY) return T + (h - T - B) * (1 - (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)));
        return T + (h - T - B) * (1 - (v - lo) / (hi - lo));
      }
      var yt = [];
      if (logY) for (var e = Math.log10(lo); e <= Math.log10(hi) + 1e-9; e++) yt.push(Math.pow(10, e));
      else yt = ticks(lo, hi, 5).values;
      ctx.strokeStyle = css("grid"); ctx.fillStyle = css("muted"); ctx.textAlign = "right"; ctx.textBaseline = "middle";
      yt.forEach(function (v) { var y = Y(v); ctx.beginPath(); ctx.moveTo(Lm, y); ctx.lineTo(w - Rm, y); ctx.stroke(); ctx.fillText(fmtNum(v), Lm - 5, y); });
      ctx.save(); ctx.translate(14, T + (h - T - B) / 2); ctx.rotate(-Math.PI / 2); ctx.textAlign = "center"; ctx.fillStyle = css("fg");
      ctx.fillText(s.metric + " (" + s.unit + ")" + (logY ? ", log" : ""), 0, 0); ctx.restore();
      var n = s.variants.length, colW = (w - Lm - Rm) / Math.max(1, n);
      s.variants.forEach(function (v, i) {
        var xs = vals[i], cx = Lm + colW * (i + 0.5), bw = Math.min(60, colW * 0.4);
        ctx.fillStyle = css("fg"); ctx.textAlign = "center"; ctx.textBaseline = "top";
        ctx.fillText(v.id + (v.baseline ? " (baseline)" : ""), cx, h - B + 6);
        ctx.fillStyle = css("muted");
        ctx.fillText(xs.length + " runs", cx, h - B + 20);
        if (!xs.length) return;
        var q1 = quantile(xs, 0.25), med = quantile(xs, 0.5), q3 = quantile(xs, 0.75);
        var col = css(v.baseline ? "hiccup" : "at");
        ctx.strokeStyle = col; ctx.lineWidth = 1.5;
        ctx.beginPath(); ctx.moveTo(cx, Y(xs[0])); ctx.lineTo(cx, Y(q1)); ctx.moveTo(cx, Y(q3)); ctx.lineTo(cx, Y(xs[xs.length - 1])); ctx.stroke();
        ctx.beginPath(); ctx.moveTo(cx - bw / 4, Y(xs[0])); ctx.lineTo(cx + bw / 4, Y(xs[0])); ctx.moveTo(cx - bw / 4, Y(xs[xs.length - 1])); ctx.lineTo(cx + bw / 4, Y(xs[xs.length - 1])); ctx.stroke();
        ctx.globalAlpha = 0.2; ctx.fillStyle = col; ctx.fillRect(cx - bw / 2, Y(q3), bw, Math.max(1, Y(q1) - Y(q3))); ctx.globalAlpha = 1;
        ctx.strokeRect(cx - bw / 2, Y(q3), bw, Math.max(1, Y(q1) - Y(q3)));
        ctx.lineWidth = 3; ctx.beginPath(); ctx.moveTo(cx - bw / 2, Y(med)); ctx.lineTo(cx + bw / 2, Y(med)); ctx.stroke(); ctx.lineWidth = 1;
        ctx.fillStyle = css("fg");
        xs.forEach(function (x, k) { ctx.beginPath(); ctx.arc(cx + bw * 0.7 + (k % 3) * 4, Y(x), 2.5, 0, 2 * Math.PI); ctx.fill(); });
      });
      // The seed's own figures, as published.
      [["seed's baseline", pub.baseline], ["seed's mitigation", pub.mitigation]].forEach(function (p) {
        if (typeof p[1] !== "number" || (logY && p[1] <= 0)) return;
        var y = Y(p[1]);
        ctx.strokeStyle = css("seed"); ctx.setLineDash([5, 4]); ctx.beginPath(); ctx.moveTo(Lm, y); ctx.lineTo(w - Rm, y); ctx.stroke(); ctx.setLineDash([]);
        ctx.fillStyle = css("seed"); ctx.textAlign = "left"; ctx.textBaseline = "middle";
        ctx.beginPath(); ctx.moveTo(w - Rm + 6, y); ctx.lineTo(w - Rm + 11, y - 5); ctx.lineTo(w - Rm + 16, y); ctx.lineTo(w - Rm + 11, y + 5); ctx.fill();
        ctx.fillText(p[0] + ": " + fmtNum(p[1]), w - Rm + 20, y);
      });
      canvas.dataset.ink = String(ink(canvas));
    }
    redrawers.push(draw);
    var graded = [], named = [];
    var who = [];
    s.variants.forEach(function (v) { v.runs.forEach(function (r) { if (r.grade) { graded.push(r.grade); if (r.grade.culprit_named !== null) named.push(r.grade.culprit_named); if (r.grade.instigator_named !== null && r.grade.instigator_named !== undefined) who.push(r.grade.instigator_named); } }); });
    return el("div", { cls: "scenario", id: "scenario-" + s.id }, [
      el("h3", null, [s.id + " — seed " + s.seed + ": " + s.title + " ", el("span", { cls: "badge " + s.verdict, text: s.verdict })]),
      el("div", { cls: "meta" }, [
        el("div", { text: "known cause" }), el("div", { cls: "mono", text: s.cause + (s.instigator ? ", set off by " + s.instigator : "") }),
        el("div", { text: "seed's figure" }), el("div", { text: s.published.text + " (" + s.published.machine + ")" }),
        el("div", { text: "verdict" }), el("div", { text: s.reason }),
        el("div", { text: "effect" }), el("div", { text: s.effect ? "baseline ÷ best mitigation = " + fmtNum(s.effect) + "×" : "–" }),
        el("div", { text: "doctor" }), el("div", { text: graded.length ? graded.filter(function (g) { return g.matched; }).length + " of " + graded.length + " runs diagnosed as " + s.cause + (named.length ? "; culprit named in " + named.filter(Boolean).length + " of " + named.length : "") + (who.length ? "; instigator named in " + who.filter(Boolean).length + " of " + who.length : "") : "no graded runs" })
      ].concat(s.notes.length ? [el("div", { text: "notes" }), el("div", { text: s.notes.join("; ") })] : [])),
      el("div", { cls: "chart" }, [canvas])
    ]);
  }
  function confusion(L) {
    var expected = Object.keys(L.confusion).sort();
    var diagnosed = {};
    expected.forEach(function (e) { Object.keys(L.confusion[e]).forEach(function (d) { diagnosed[d] = true; }); });
    var cols = Object.keys(diagnosed).sort();
    var cells = 0;
    var table = el("table", { cls: "confusion" }, [
      el("thead", null, [el("tr", null, [el("th", { text: "known cause ↓ / diagnosed →" })].concat(cols.map(function (c) { return el("th", { text: c }); })))]),
      el("tbody", null, expected.map(function (e) {
        return el("tr", null, [el("th", { text: e })].concat(cols.map(function (c) {
          var n = L.confusion[e][c] || 0;
          if (n) cells++;
          return el("td", { cls: n ? (c === e ? "diag" : "off") : "", text: n ? String(n) : "" });
        })));
      }))
    ]);
    return el("section", { id: "confusion", "data-cells": String(cells) }, [
      el("h2", { text: "The doctor's confusion matrix" }),
      el("p", { cls: "muted", text: "Every graded run: the cause the scenario is known to produce, against the main cause stallscope named for its longest stall. The diagonal is right." }),
      expected.length ? table : el("p", { cls: "muted", text: "No graded runs." })
    ]);
  }

  // ---------------------------------------------------------------- start
  // The theme: "auto" follows prefers-color-scheme; the stylesheet knows only data-theme.
  var themeMode = "auto";
  var darkQuery = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function applyTheme(forPrint) {
    var dark = !forPrint && (themeMode === "dark" || (themeMode === "auto" && darkQuery && darkQuery.matches));
    document.documentElement.setAttribute("data-theme", dark ? "dark" : "light");
  }
  function themeButton() {
    var b = document.getElementById("theme");
    var modes = ["auto", "light", "dark"], i = 0;
    b.addEventListener("click", function () {
      i = (i + 1) % modes.length;
      themeMode = modes[i];
      b.textContent = "theme: " + modes[i];
      applyTheme(false);
      redrawAll();
    });
    document.getElementById("print").addEventListener("click", function () { window.print(); });
    // Paper is white: print in the light theme, then go back.
    window.addEventListener("beforeprint", function () { applyTheme(true); redrawAll(); });
    window.addEventListener("afterprint", function () { applyTheme(false); redrawAll(); });
    if (darkQuery && darkQuery.addEventListener) darkQuery.addEventListener("change", function () { applyTheme(false); redrawAll(); });
    var pending = null;
    window.addEventListener("resize", function () {
      if (pending) clearTimeout(pending);
      pending = setTimeout(redrawAll, 100);
    });
  }

  try {
    var D = JSON.parse(document.getElementById("stallscope-data").textContent);
    var app = document.getElementById("app");
    app.textContent = "";
    document.body.dataset.kind = D.kind;
    applyTheme(false);
    if (D.kind === "recording") recordingPage(app, D.recording);
    else if (D.kind === "lab") labPage(app, D.lab);
    else throw new Error("unknown report kind " + D.kind);
    app.appendChild(el("footer", { text: "stallscope " + D.version + ", report generated " + D.generated + ". Self-contained: this file needs no network." }));
    themeButton();
    redrawAll();
    document.body.dataset.renderMs = (performance.now() - t0).toFixed(1);
    document.body.dataset.rendered = "ok";
  } catch (e) {
    reportError("error: " + (e && e.stack ? e.stack : e));
    document.body.dataset.rendered = "failed";
  }
})();
