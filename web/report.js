// bakeoff report pages (report/html_page.h): draws the JSON block #bakeoff-data with uPlot.
// Kinds: "run" (one bench or simulate run), "study" (a results bundle), "compare" (two runs).
// Every chart and table of emulated or simulated figures carries a badge saying so; every chart
// records how many series it drew (data-series) so the page's tests can check it.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('bakeoff-data').textContent);
  const root = document.getElementById('page');
  const COLORS = ['#1f6fd1', '#d1521f', '#2e9a48', '#8a3fc7', '#c29b00', '#0f9c9c', '#c2307a', '#5b6474',
                  '#7c5a2a', '#3c8d2f'];
  const NINES_TICKS = [0, 1, 2, 3, 4];
  const INPUT = {};  // table(..., INPUT): the rows are inputs, not measured figures
  const NINES_LABELS = ['0%', '90%', '99%', '99.9%', '99.99%'];

  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') e.textContent = v; else if (k === 'cls') e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children || []) e.append(c);
    return e;
  }
  function num(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    if (typeof v !== 'number') return String(v);
    const d = digits === undefined ? (Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2) : digits;
    return v.toLocaleString('en-US', {minimumFractionDigits: d, maximumFractionDigits: d});
  }
  function pct(v) { return v === null || v === undefined ? '–' : num(100 * v, 1) + '%'; }
  function positive(v) { return typeof v === 'number' && v > 0 && Number.isFinite(v) ? v : null; }

  // What every chart and table of this page's figures must say on its face.
  function provenance(d) {
    if (d.simulated) return 'SIMULATED (emulated engine)';
    if (d.emulated) return 'EMULATED engine';
    return '';
  }
  function badge(label) { return label ? el('span', {cls: 'badge', text: label}) : ''; }

  function section(title, label) {
    const h = el('h2', {text: title});
    if (label) h.append(badge(label));
    root.append(h);
    return h;
  }

  // A table of figures says on its face what they come from (label); one of inputs (the workload,
  // the catalog's facts) is marked as such instead.
  function table(headers, rows, label, rowClass) {
    const t = el('table', label === INPUT ? {'data-input': '1'} : {'data-table': '1'});
    if (label === INPUT) label = '';
    if (label) t.append(el('caption', {}, [badge(label)]));
    t.append(el('tr', {}, headers.map((h, i) => el('th', {cls: i === 0 ? 'text' : '', text: h}))));
    rows.forEach((r, j) => {
      const tr = el('tr', {cls: rowClass ? rowClass(j) : ''});
      r.forEach((c, i) => {
        const td = el('td', {cls: i === 0 || typeof c === 'string' && !/^[-–0-9.,%]+$/.test(c) ? 'text' : ''});
        if (c instanceof Node) td.append(c); else td.textContent = c;
        tr.append(td);
      });
      t.append(tr);
    });
    return t;
  }

  function list(items, cls) { return el('ul', {cls: cls || ''}, items.map((s) => el('li', {text: s}))); }

  const grids = [];
  function grid() { const g = el('div', {cls: 'grid'}); root.append(g); grids.push(g); return g; }

  // A uPlot chart in a card. series: [{label, values, dash?, scale?, bars?}], x shared.
  function chart(parent, opts) {
    const card = el('div', {cls: 'card'});
    const title = el('h3', {text: opts.title});
    title.append(badge(opts.provenance));
    card.append(title);
    const holder = el('div', {cls: 'chart', 'data-chart': opts.name});
    card.append(holder);
    if (opts.caption) card.append(el('div', {cls: 'caption', text: opts.caption}));
    parent.append(card);
    const drawn = opts.series.filter((s) => s.values.some((v) => v !== null && v !== undefined));
    holder.dataset.series = String(drawn.length);
    if (drawn.length === 0 || opts.x.length === 0) {
      holder.append(el('div', {cls: 'caption', text: 'nothing to draw: no measured values'}));
      return;
    }
    const scales = {x: {time: false}};
    if (opts.xrange) scales.x.range = opts.xrange;
    scales.y = opts.ylog ? {distr: 3} : {};
    if (opts.y2) scales.y2 = opts.y2.range ? {range: opts.y2.range} : {};
    const axes = [
      Object.assign({label: opts.xlabel}, opts.nines ? {splits: () => NINES_TICKS, values: (u, s) => s.map((v) => NINES_LABELS[v] || '')} : {}),
      {label: opts.ylabel, size: 60},
    ];
    if (opts.y2) axes.push({scale: 'y2', side: 1, label: opts.y2.label, grid: {show: false}, size: 60});
    const series = [{label: opts.xlabel}].concat(drawn.map((s, i) => ({
      label: s.label,
      stroke: s.color || COLORS[i % COLORS.length],
      width: s.width || 1.75,
      dash: s.dash,
      scale: s.scale || 'y',
      points: {show: s.points !== undefined ? s.points : opts.x.length <= 24},
      paths: s.bars ? uPlot.paths.bars({size: [0.9, 60]}) : undefined,
      fill: s.bars ? (s.color || COLORS[i % COLORS.length]) + '88' : undefined,
      spanGaps: true,
    })));
    const marks = opts.marks || [];
    const plugins = marks.length ? [{hooks: {draw: [(u) => {
      const ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = '#9aa3b2';
      ctx.setLineDash([4, 4]);
      ctx.fillStyle = '#5b6474';
      ctx.font = `${11 * devicePixelRatio}px sans-serif`;
      marks.forEach((m, k) => {
        const px = u.valToPos(m.x, 'x', true);
        if (!Number.isFinite(px)) return;
        ctx.beginPath();
        ctx.moveTo(px, u.bbox.top);
        ctx.lineTo(px, u.bbox.top + u.bbox.height);
        ctx.stroke();
        // Labels stacked, so marks at the same place (a tie) stay readable.
        ctx.fillText(m.label, px + 3, u.bbox.top + (12 + 13 * (k % 4)) * devicePixelRatio);
      });
      ctx.restore();
    }]}}] : [];
    const width = Math.max(420, (parent.clientWidth || 1180) / (parent.classList.contains('grid') ? 2 : 1) - 40);
    const plot = new uPlot({width: Math.min(width, 600), height: 280, scales, axes, series, plugins,
                            legend: {live: false}, cursor: {drag: {x: true, y: false}}},
                           [opts.x].concat(drawn.map((s) => s.values)), holder);
    holder.dataset.drawn = '1';
    return plot;
  }

  // Latency quantile curves: one series per step or candidate, x in nines, y log.
  function curveChart(parent, name, title, nines, curves, label) {
    return chart(parent, {
      name, title, provenance: label, x: nines, xlabel: 'quantile', ylabel: 'ms (log)', ylog: true, nines: true,
      series: curves.map((c) => Object.assign({}, c, {values: (c.values || []).map(positive), points: false})),
      caption: 'Each point is an observed request (nearest rank) at that quantile; exact under 65,536 samples per ' +
               'step, within 0.39% past it.',
    });
  }

  function header(title, subtitle, d) {
    root.append(el('h1', {text: title}));
    if (subtitle) root.append(el('div', {cls: 'meta', text: subtitle}));
    const label = provenance(d);
    if (label) {
      root.append(el('div', {cls: 'provenance', 'data-provenance': d.simulated ? 'simulated' : 'emulated',
        text: (d.simulated ? 'SIMULATED. ' : 'EMULATED. ') + 'These figures come from bakeoff\u2019s emulated engine' +
              (d.simulated ? ' on a virtual clock' : '') + ': a model of an engine, never evidence about a real one.'}));
    }
    if (d.notes && d.notes.length) root.append(list(d.notes, 'notes'));
  }

  function sortedBy(xs, rows) {
    const idx = xs.map((x, i) => i).sort((a, b) => xs[a] - xs[b]);
    return {x: idx.map((i) => xs[i]), rows: idx.map((i) => rows[i])};
  }

  const METRIC_NAMES = {ttft_ms: 'TTFT', tpot_ms: 'TPOT', itl_token_ms: 'ITL (per token)', e2e_ms: 'E2E'};

  function sloSeries(slo, n, metrics) {
    return slo.filter((t) => metrics.includes(t.metric)).map((t) => ({
      label: 'SLO ' + t.term, values: new Array(n).fill(t.threshold_ms), dash: [6, 4], color: '#b3261e', points: false,
    }));
  }

  // The per-request timeline: send lag, waiting for the first token (queue + prefill), decoding.
  function requestTimeline(parent, timeline, label) {
    const card = el('div', {cls: 'card'});
    const title = el('h3', {text: `Request timelines: ${timeline.requests.length} sampled requests of ${timeline.step}`});
    title.append(badge(label));
    card.append(title);
    const holder = el('div', {cls: 'chart', 'data-chart': 'request-timeline'});
    card.append(holder);
    const parts = [['send lag', '#c29b00'], ['waiting for the first token (queue + prefill)', '#d1521f'],
                   ['decoding', '#1f6fd1']];
    card.append(el('div', {cls: 'caption'}, parts.flatMap(([n, c]) => [el('span', {cls: 'legend-swatch', style: `background:${c}`}), n])));
    parent.append(card);
    const reqs = timeline.requests.filter((r) => r.intended_ms !== null || r.start_ms !== null);
    holder.dataset.series = String(reqs.length ? parts.length : 0);
    if (!reqs.length) { holder.append(el('div', {cls: 'caption', text: 'no requests recorded in this step'})); return; }
    const begin = Math.min(...reqs.map((r) => r.intended_ms !== null ? r.intended_ms : r.start_ms));
    const end = Math.max(...reqs.map((r) => r.finished_ms !== null ? r.finished_ms : (r.start_ms || begin)));
    const w = 560, rowH = Math.max(3, Math.min(8, Math.floor(260 / reqs.length))), h = rowH * reqs.length + 30;
    const canvas = el('canvas', {width: w * devicePixelRatio, height: h * devicePixelRatio, class: 'gantt', style: `width:${w}px;height:${h}px`});
    holder.append(canvas);
    const ctx = canvas.getContext('2d');
    ctx.scale(devicePixelRatio, devicePixelRatio);
    const left = 40, span = Math.max(end - begin, 1e-9), sx = (t) => left + (w - left - 10) * (t - begin) / span;
    reqs.forEach((r, i) => {
      const y = 4 + i * rowH;
      const segs = [[r.intended_ms, r.start_ms, parts[0][1]], [r.start_ms, r.first_token_ms, parts[1][1]],
                    [r.first_token_ms, r.finished_ms, parts[2][1]]];
      for (const [a, b, c] of segs) {
        if (a === null || b === null) continue;
        ctx.fillStyle = c;
        ctx.fillRect(sx(a), y, Math.max(1, sx(b) - sx(a)), rowH - 1);
      }
      if (r.outcome !== 'ok') { ctx.fillStyle = '#b3261e'; ctx.fillRect(left - 6, y, 4, rowH - 1); }
    });
    ctx.fillStyle = '#5b6474';
    ctx.font = '11px sans-serif';
    ctx.fillText('0 s', left, h - 8);
    ctx.fillText(`${num(span / 1000, 2)} s`, w - 50, h - 8);
    holder.dataset.drawn = '1';
  }

  function histogramChart(parent, name, title, hist, xlabel, label) {
    return chart(parent, {name, title, provenance: label, x: hist.edges || [], xlabel, ylabel: 'requests',
                          series: [{label: 'requests', values: hist.counts || [], bars: true, points: false}]});
  }

  // ---- one run -------------------------------------------------------------------------------------
  function renderRun(d) {
    const label = provenance(d);
    const t = d.target || {};
    const what = t.simulated ? `simulated ${t.engine_preset || 'engine'} x${t.replicas || 1} (${t.router || ''})`
                             : `${t.url || ''} ${t.model ? '· ' + t.model : ''}`;
    header('bakeoff run report', `${what}${d.started_at ? ' · started ' + d.started_at : ''}` +
           `${d.seed !== null && d.seed !== undefined ? ' · seed ' + d.seed : ''} · ${(d.tool || {}).name || 'bakeoff'} ` +
           `${(d.tool || {}).version || ''}`, d);
    const steps = d.steps || [];
    section('Steps', label);
    root.append(table(['step', 'measured', 'req/s', 'out tok/s', 'goodput/s', 'SLO attainment', 'TTFT p50', 'TTFT p99',
                       'TPOT p50', 'TPOT p99', 'ITL p99', 'E2E p99', 'send lag p99', 'generator-limited'],
      steps.map((s) => [s.label, num(s.measured, 0), num(s.requests_per_s), num(s.output_tokens_per_s), num(s.goodput_per_s),
                        pct(s.attainment), num(s.ttft_ms.p50), num(s.ttft_ms.p99) + (s.ttft_ms.p99_bounded ? '' : '*'),
                        num(s.tpot_ms.p50), num(s.tpot_ms.p99), num(s.itl_token_ms.p99), num(s.e2e_ms.p99),
                        num(s.send_lag_ms.p99), s.generator_limited ? 'YES' : 'no']), label));
    root.append(el('div', {cls: 'caption', text: 'Latencies in ms; * = too few samples for a 95% bound on p99.'}));

    section('Latency distributions', label);
    let g = grid();
    for (const m of ['ttft_ms', 'tpot_ms', 'itl_token_ms', 'e2e_ms']) {
      curveChart(g, 'curve-' + m, `${METRIC_NAMES[m]} by quantile, per step`, d.curve_nines,
                 (d.curves[m] || []).map((c) => ({label: c.step, values: c.values})), label);
    }

    if (steps.length > 1) {
      section('Against load', label);
      g = grid();
      const ax = d.load_axis;
      const s = sortedBy(ax.x, steps);
      chart(g, {name: 'load-latency', title: 'Latency percentiles against load', provenance: label, x: s.x,
                xlabel: ax.name, ylabel: 'ms (log)', ylog: true,
                series: [
                  {label: 'TTFT p50', values: s.rows.map((r) => positive(r.ttft_ms.p50))},
                  {label: 'TTFT p99', values: s.rows.map((r) => positive(r.ttft_ms.p99))},
                  {label: 'TPOT p99', values: s.rows.map((r) => positive(r.tpot_ms.p99))},
                  {label: 'E2E p99', values: s.rows.map((r) => positive(r.e2e_ms.p99))},
                ].concat(sloSeries(d.slo || [], s.x.length, ['ttft', 'tpot', 'e2e', 'itl']))});
      chart(g, {name: 'load-throughput', title: 'Throughput and goodput against load', provenance: label, x: s.x,
                xlabel: ax.name, ylabel: 'requests/s', y2: {label: 'output tokens/s'},
                series: [
                  {label: 'requests/s', values: s.rows.map((r) => r.requests_per_s)},
                  {label: 'goodput/s', values: s.rows.map((r) => r.goodput_per_s)},
                  {label: 'output tokens/s', values: s.rows.map((r) => r.output_tokens_per_s), scale: 'y2'},
                ]});
    }

    section('The client and the engine over time', label);
    g = grid();
    const marks = (d.step_starts_s || []).map((x, i) => ({x, label: steps[i] ? steps[i].label : ''}));
    chart(g, {name: 'send-lag', title: 'Send lag over the run (worst per bin)', provenance: label, x: d.send_lag.t_s,
              xlabel: 'seconds into the run', ylabel: 'ms', marks,
              series: [{label: 'send lag ms', values: d.send_lag.values}],
              caption: 'How late the client sent each request against its schedule: a lagging client shapes the ' +
                       'numbers (the steps table says "generator-limited").'});
    if (d.metrics && d.metrics.t_s && d.metrics.t_s.length) {
      const m = d.metrics;
      const names = {running: 'running', waiting: 'waiting', preemptions: 'preemptions (counter)'};
      const series = Object.keys(names).filter((k) => m.series[k]).map((k) => ({label: names[k], values: m.series[k]}));
      if (m.series.kv_usage) series.push({label: 'KV cache usage', values: m.series.kv_usage, scale: 'y2'});
      chart(g, {name: 'engine-metrics', title: 'The engine\u2019s own gauges (its /metrics page)', provenance: label,
                x: m.t_s, xlabel: 'seconds since scraping began', ylabel: 'requests', y2: {label: 'KV usage', range: [0, 1]},
                marks: (m.steps || []).map((s) => ({x: s.from_s, label: steps[s.step] ? steps[s.step].label : ''})),
                series});
    }
    requestTimeline(g, d.timeline, label);

    section('Workload as sent', label);
    g = grid();
    chart(g, {name: 'arrivals', title: 'Arrivals per second (intended send instants)', provenance: label,
              x: d.arrivals.t_s, xlabel: 'seconds into the run', ylabel: 'requests/s', marks,
              series: [{label: 'arrivals/s', values: d.arrivals.values}]});
    histogramChart(g, 'prompt-lengths', 'Prompt lengths (server-counted where reported)', d.prompt_tokens, 'tokens', label);
    histogramChart(g, 'output-lengths', 'Output lengths', d.output_tokens, 'tokens', label);
  }

  function statusOf(v, name) { return (v.candidates || []).find((c) => c.name === name); }

  // ---- a study bundle ------------------------------------------------------------------------------
  function renderStudy(d) {
    const label = provenance(d);
    // A pooling study's answers are whole: its figures are E2E and inputs (texts, documents) per second.
    const pooling = d.task === 'embedding' || d.task === 'rerank';
    const m = d.manifest || {};
    header(`Study: ${m.study || ''}`, `bundle made ${m.created_utc || ''} · finished ${m.finished_utc || ''} · ` +
           `${m.tool || 'bakeoff'} ${m.tool_version || ''} · traffic seed ${(m.seeds || {}).traffic}`, d);
    const v = d.verdict || {};
    section('Verdict', label);
    const chosen = v.choice || '';
    const box = el('div', {cls: 'verdict' + (chosen ? '' : ' none'), 'data-verdict': chosen || 'none'});
    box.append(el('div', {text: chosen ? `Choice: ${chosen}` + (v.rollback ? ` · rollback: ${v.rollback}` : '') +
                                         (v.tied ? ` (a tie within the search precision, decided by ${pooling ? 'E2E' : 'TTFT'} p99)` : '')
                                       : 'No candidate met the study\u2019s SLO.'}));
    box.append(list((v.rationale || []).map((s) => `${s.text}${(s.pointers || []).length ? '  [' + s.pointers.join(', ') + ']' : ''}`)));
    root.append(box);
    const cands = d.candidates || [];
    root.append(table(['candidate', 'engine', 'version', 'status', 'capacity (req/s)', 'cold start s', 'drain s', 'why not'],
      cands.map((c) => [c.name, c.engine || '', c.version || 'not recorded', c.status || '',
                        c.capacity_per_s > 0 ? num(c.capacity_per_s) : '–', c.cold_start_s >= 0 ? num(c.cold_start_s) : '–',
                        c.drain_s >= 0 ? num(c.drain_s) : '–', ((statusOf(v, c.name) || {}).reasons || []).join('; ')]),
      label, (j) => cands[j].name === chosen ? 'chosen' : ''));
    const evidence = [];
    for (const c of v.candidates || []) for (const e of c.evidence || []) evidence.push([c.name, e.clause, e.status, e.text, e.pointer || '']);
    if (evidence.length) {
      root.append(el('h3', {text: 'Evidence per SLO clause'}));
      root.append(table(['candidate', 'clause', 'status', 'evidence', 'pointer'], evidence, label));
    }
    const risks = [];
    for (const c of v.candidates || []) for (const r of c.risks || []) risks.push([c.name, r]);
    if (risks.length) {
      root.append(el('h3', {text: 'Risks (stated in the record, not eliminations)'}));
      root.append(table(['candidate', 'risk'], risks, label));
    }
    if ((v.mistakes || []).length) {
      root.append(el('h3', {text: 'Method mistakes found'}));
      root.append(list(v.mistakes.map((x) => `${x.code}: ${x.message || x.text || ''}`)));
    }
    if ((v.revisit_when || []).length) {
      root.append(el('h3', {text: 'Revisit when'}));
      root.append(list(v.revisit_when.map(String)));
    }

    section('Elimination table (hard constraints)', label);
    const gate = (d.gate || {}).candidates || [];
    const constraints = [];
    for (const row of gate) for (const c of row.cells || []) if (!constraints.includes(c.constraint)) constraints.push(c.constraint);
    root.append(table(['candidate'].concat(constraints), gate.map((row) => [row.candidate].concat(constraints.map((k) => {
      const c = (row.cells || []).find((x) => x.constraint === k);
      if (!c) return '';
      const span = el('span', {cls: c.status, title: `${c.reason} (${c.evidence})`, text: c.status});
      return span;
    }))), label));

    section('Probe findings', label);
    const findings = [];
    for (const c of cands) {
      for (const f of c.findings || []) {
        const beside = [f.known_limit ? `catalog known limit: ${f.known_limit}` : '',
                        f.accepted_reason ? `accepted: ${f.accepted_reason}` : ''].filter(Boolean).join('; ');
        findings.push([c.name, (f.judgement || f.severity || '').replace('_', ' '), f.breaks || '–', f.code, f.message, beside]);
      }
    }
    if (findings.length) {
      root.append(el('div', {cls: 'caption', text: 'Judged against the study: a finding disqualifies only when it ' +
                             'breaks a feature, SLO clause or contract the study states; the others are risks or notes.'}));
      root.append(table(['candidate', 'judged', 'breaks', 'finding', 'message', 'beside it'], findings, label));
    }
    else root.append(el('div', {cls: 'caption', text: 'No probe found anything to report.'}));
    const verdicts = cands.filter((c) => (c.probe_verdicts || []).length).map((c) => [c.name, c.probe_verdicts.join(', ')]);
    if (verdicts.length) root.append(table(['candidate', 'probe verdicts'], verdicts, label));

    section('Capacity under the SLO', label);
    let g = grid();
    const rates = [...new Set(cands.flatMap((c) => (c.capacity_points || []).map((p) => p.rate_per_s)))].sort((a, b) => a - b);
    const at = (c, f) => rates.map((r) => { const p = (c.capacity_points || []).find((q) => q.rate_per_s === r); return p ? positive(f(p)) : null; });
    const capMarks = cands.filter((c) => c.capacity_per_s > 0).map((c) => ({x: c.capacity_per_s, label: `${c.name} capacity`}));
    const tail = pooling ? {name: 'e2e', title: 'E2E', of: (p) => p.e2e_p99_ms}
                         : {name: 'ttft', title: 'TTFT', of: (p) => p.ttft_p99_ms};
    chart(g, {name: 'capacity-' + tail.name, title: `${tail.title} p99 against offered rate (capacity search)`,
              provenance: label, x: rates, xlabel: 'offered rate (requests/s)', ylabel: 'ms (log)', ylog: true, marks: capMarks,
              series: cands.map((c) => ({label: c.name, values: at(c, tail.of)})).concat(
                sloSeries(d.slo || [], rates.length, [tail.name]))});
    chart(g, {name: 'capacity-attainment', title: 'SLO attainment against offered rate', provenance: label, x: rates,
              xlabel: 'offered rate (requests/s)', ylabel: 'attainment', marks: capMarks,
              series: cands.map((c) => ({label: c.name, values: at(c, (p) => p.attainment)})).concat(
                d.attainment_target ? [{label: 'target', values: rates.map(() => d.attainment_target), dash: [6, 4], color: '#b3261e'}] : [])});
    const sweepX = [...new Set(cands.flatMap((c) => (c.sweep || []).map((p) => p.concurrency)))].sort((a, b) => a - b);
    const sweepAt = (c, f) => sweepX.map((x) => { const p = (c.sweep || []).find((q) => q.concurrency === x); return p ? f(p) : null; });
    if (pooling) {
      chart(g, {name: 'sweep-throughput', title: 'Inputs/s against concurrency (sweep)', provenance: label, x: sweepX,
                xlabel: 'concurrency', ylabel: 'inputs/s',
                series: cands.map((c) => ({label: c.name, values: sweepAt(c, (p) => p.inputs_per_s)}))});
      chart(g, {name: 'sweep-e2e', title: 'E2E p50 against concurrency (sweep)', provenance: label, x: sweepX,
                xlabel: 'concurrency', ylabel: 'ms',
                series: cands.map((c) => ({label: c.name, values: sweepAt(c, (p) => positive(p.e2e_p50_ms))}))});
    } else {
      chart(g, {name: 'sweep-throughput', title: 'Output tokens/s against concurrency (sweep)', provenance: label, x: sweepX,
                xlabel: 'concurrency', ylabel: 'output tokens/s',
                series: cands.map((c) => ({label: c.name, values: sweepAt(c, (p) => p.output_tokens_per_s)}))});
      chart(g, {name: 'sweep-tpot', title: 'TPOT p50 against concurrency (sweep)', provenance: label, x: sweepX,
                xlabel: 'concurrency', ylabel: 'ms',
                series: cands.map((c) => ({label: c.name, values: sweepAt(c, (p) => positive(p.tpot_p50_ms))}))});
    }

    section('The workload replayed on every candidate', label);
    g = grid();
    for (const metric of pooling ? ['e2e_ms'] : ['ttft_ms', 'tpot_ms', 'e2e_ms']) {
      curveChart(g, 'replay-' + metric, `${METRIC_NAMES[metric]} by quantile, workload replay`, d.curve_nines,
                 cands.filter((c) => c.replay).map((c) => ({label: c.name, values: c.replay[metric] || []})), label);
    }
    const w = d.workload || {};
    if (w.arrivals) {
      chart(g, {name: 'workload-arrivals', title: 'Workload arrivals per second', provenance: w.synthesized ? 'synthesized' : '',
                x: w.arrivals.t_s, xlabel: 'seconds', ylabel: 'requests/s', series: [{label: 'arrivals/s', values: w.arrivals.values}]});
      histogramChart(g, 'workload-prompts', 'Workload prompt lengths', w.prompt_tokens, 'tokens', '');
      if (!pooling) histogramChart(g, 'workload-outputs', 'Workload output lengths', w.output_tokens, 'tokens', '');
    }
    if (w.fingerprint) {
      root.append(table(['workload figure', 'value'], Object.entries(w.fingerprint).map(([k, val]) => [k, typeof val === 'number' ? num(val) : String(val)]), INPUT));
    }
  }

  // ---- two runs ------------------------------------------------------------------------------------
  function renderCompare(d) {
    const c = d.comparison;
    const runs = [d.old_run || {}, d.new_run || {}];
    const emulated = runs.some((r) => r.emulated);
    const label = emulated ? (runs.every((r) => r.simulated) ? 'SIMULATED (emulated engine)' : 'includes EMULATED figures') : '';
    header('bakeoff compare', `old: ${c.old} · new: ${c.new} · tolerance ${pct(c.tolerance)}`,
           {emulated, simulated: runs.every((r) => r.simulated), notes: d.notes});
    root.append(el('div', {cls: 'verdict' + (c.regressed ? ' none' : ''), 'data-regressed': String(!!c.regressed),
                           text: c.regressed ? 'REGRESSED: a gated metric is worse beyond the tolerance, with separate bounds.'
                                             : 'No regression: no gated metric is detectably worse beyond the tolerance.'}));
    for (const [title, items] of [['The runs\u2019 settings differ', c.differences], ['Unequal work', c.unequal_work],
                                  ['Not compared (in one run only)', c.unmatched_steps]]) {
      if ((items || []).length) { root.append(el('h3', {text: title})); root.append(list(items)); }
    }
    section('Per step and metric', label);
    const bounds = (b) => b ? `${num(b[0])} – ${num(b[1])}` : '–';
    root.append(table(['step', 'metric', 'old', 'new', 'change', 'old 95% bounds', 'new 95% bounds', 'verdict', 'basis'],
      (c.changes || []).map((m) => [m.step, m.metric, num(m.old), num(m.new), pct(m.relative_change), bounds(m.old_ci95),
        bounds(m.new_ci95), el('span', {cls: m.verdict === 'worse' ? 'worse' : m.verdict === 'better' ? 'better' : '',
                                         text: m.verdict + (m.gates ? '' : ' (not gated)')}), m.basis]), label));
    section('The two runs overlaid', label);
    const g = grid();
    for (const m of ['ttft_ms', 'tpot_ms', 'itl_token_ms', 'e2e_ms']) {
      const series = [];
      runs.forEach((r, k) => ((r.curves || {})[m] || []).forEach((cv, i) => series.push({
        label: `${k ? 'new' : 'old'} ${cv.step}`, values: cv.values, color: COLORS[i % COLORS.length], dash: k ? undefined : [5, 4]})));
      curveChart(g, 'compare-' + m, `${METRIC_NAMES[m]} by quantile: old (dashed) and new`, runs[1].curve_nines || runs[0].curve_nines || [],
                 series, label);
    }
  }

  try {
    if (data.kind === 'run') renderRun(data);
    else if (data.kind === 'study') renderStudy(data);
    else if (data.kind === 'compare') renderCompare(data);
    else root.append(el('p', {text: `This page does not know how to draw "${data.kind}".`}));
    document.body.dataset.rendered = 'ok';
  } catch (err) {
    root.append(el('pre', {cls: 'notes', text: 'The report could not be drawn: ' + err}));
    document.body.dataset.rendered = 'error';
    throw err;
  }
})();
