// Opens bakeoff's report pages in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core from npm) from file:// URLs with networking off, and checks what a reader
// would see: the page drew without a console error, no request left the page, every chart drew
// the series its data holds (a non-blank canvas), emulated figures are labelled on every chart
// and table, and keeps a full-page screenshot of each in the output folder.
// Usage: node check_pages.mjs OUT_DIR PAGE.html[=NAME] ...   Exit 0 when every page passes.
import {chromium} from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [outDir, ...pages] = process.argv.slice(2);
if (!outDir || pages.length === 0) {
  console.error('usage: node check_pages.mjs OUT_DIR PAGE.html[=NAME] ...');
  process.exit(2);
}
fs.mkdirSync(outDir, {recursive: true});
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const browser = await chromium.launch({executablePath, args: ['--no-sandbox', '--disable-gpu']});
let failures = 0;

// What the page's own data says each chart must draw: the number of series, by chart name.
function expectedSeries(d) {
  const nonEmpty = (curves) => curves.filter((c) => (c.values || []).some((v) => v > 0)).length;
  const out = {};
  if (d.kind === 'run') {
    for (const m of ['ttft_ms', 'tpot_ms', 'itl_token_ms', 'e2e_ms']) out['curve-' + m] = nonEmpty(d.curves[m]);
    out['request-timeline'] = d.timeline.requests.length ? 3 : 0;
    // A run that kept no records (or had no ok request) has nothing to draw there.
    out['arrivals'] = (d.arrivals.values || []).some((v) => v > 0) ? 1 : 0;
    out['prompt-lengths'] = (d.prompt_tokens.counts || []).length ? 1 : 0;
    out['output-lengths'] = (d.output_tokens.counts || []).length ? 1 : 0;
    if (d.steps.length > 1) out['load-throughput'] = 3;
    if (d.metrics && d.metrics.t_s.length) out['engine-metrics'] = Object.keys(d.metrics.series).length;
  } else if (d.kind === 'study') {
    // A pooling study's page draws E2E and inputs/s: its answers have no TTFT or TPOT.
    const pooling = d.task === 'embedding' || d.task === 'rerank';
    const replayed = d.candidates.filter((c) => c.replay);
    for (const m of pooling ? ['e2e_ms'] : ['ttft_ms', 'tpot_ms', 'e2e_ms']) out['replay-' + m] = replayed.length;
    const tail = pooling ? 'e2e' : 'ttft';
    out['capacity-' + tail] = d.candidates.filter((c) => (c.capacity_points || []).some((p) => p[tail + '_p99_ms'] > 0)).length +
                              d.slo.filter((t) => t.metric === tail).length;
    out['sweep-throughput'] = d.candidates.filter((c) => (c.sweep || []).length).length;
  } else if (d.kind === 'compare') {
    for (const m of ['ttft_ms', 'tpot_ms', 'e2e_ms']) {
      out['compare-' + m] = [d.old_run, d.new_run].reduce((n, r) => n + (r ? nonEmpty(r.curves[m]) : 0), 0);
    }
  }
  return out;
}

for (const spec of pages) {
  const [file, name = path.basename(file, '.html')] = spec.split('=');
  const problems = [];
  const context = await browser.newContext({offline: true, viewport: {width: 1280, height: 900}});
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file:') || url.startsWith('data:')) return route.continue();
    problems.push(`a request left the page: ${url}`);
    return route.abort();
  });
  const page = await context.newPage();
  page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`); });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('request', (req) => {
    const url = req.url();
    if (!url.startsWith('file:') && !url.startsWith('data:')) problems.push(`request: ${url}`);
  });
  const started = Date.now();
  await page.goto(pathToFileURL(path.resolve(file)).href);
  await page.waitForFunction(() => document.body.dataset.rendered, null, {timeout: 20000}).catch(() => {
    problems.push('the page never finished drawing');
  });
  const drawnMs = Date.now() - started;
  const state = await page.evaluate(() => {
    const data = JSON.parse(document.getElementById('bakeoff-data').textContent);
    const charts = [...document.querySelectorAll('.chart')].map((c) => {
      // Non-blank: some pixel of some canvas is neither transparent nor white.
      let inked = 0;
      for (const canvas of c.querySelectorAll('canvas')) {
        const ctx = canvas.getContext('2d');
        const {data: px} = ctx.getImageData(0, 0, canvas.width, canvas.height);
        for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 0 && (px[i] < 240 || px[i + 1] < 240 || px[i + 2] < 240)) inked++;
      }
      const card = c.closest('.card');
      return {name: c.dataset.chart, series: Number(c.dataset.series), drawn: c.dataset.drawn === '1', inked,
              badge: !!(card && card.querySelector('h3 .badge'))};
    });
    const tables = [...document.querySelectorAll('table[data-table]')].map((t) => !!t.querySelector('caption .badge'));
    return {data, rendered: document.body.dataset.rendered, charts, tables, text: document.body.innerText,
            provenance: !!document.querySelector('.provenance')};
  });
  if (state.rendered !== 'ok') problems.push(`rendered: ${state.rendered}`);
  const expected = expectedSeries(state.data);
  for (const [chartName, n] of Object.entries(expected)) {
    const c = state.charts.find((x) => x.name === chartName);
    if (!c) { problems.push(`chart ${chartName} is missing`); continue; }
    if (c.series !== n) problems.push(`chart ${chartName} drew ${c.series} series, its data has ${n}`);
  }
  for (const c of state.charts) {
    if (c.series > 0 && (!c.drawn || c.inked === 0)) problems.push(`chart ${c.name} is blank`);
  }
  if (state.charts.length === 0) problems.push('no chart on the page');
  if (state.data.kind === 'study' && ['embedding', 'rerank'].includes(state.data.task)) {
    for (const word of ['TTFT', 'TPOT']) if (state.text.includes(word)) problems.push(`a pooling study's page says ${word}`);
  }
  const emulated = state.data.emulated || state.data.simulated ||
                   (state.data.kind === 'compare' && [state.data.old_run, state.data.new_run].some((r) => r && r.emulated));
  if (emulated) {
    if (!state.provenance) problems.push('emulated figures without the page-wide "EMULATED" notice');
    const unlabeled = state.charts.filter((c) => !c.badge && !/^workload-/.test(c.name)).map((c) => c.name);
    if (unlabeled.length) problems.push(`charts of emulated figures without a label: ${unlabeled.join(', ')}`);
    if (state.tables.some((labelled) => !labelled)) problems.push('a table of emulated figures without a label');
  }
  const shot = path.join(outDir, `${name}.png`);
  await page.screenshot({path: shot, fullPage: true});
  await page.screenshot({path: path.join(outDir, `${name}-top.png`)});  // the first screen, for docs/
  const grid = page.locator('.grid').first();
  if (await grid.count()) await grid.screenshot({path: path.join(outDir, `${name}-charts.png`)});  // its first charts
  const verdict = problems.length ? 'FAIL' : 'ok';
  console.log(`${verdict} ${name}: ${state.charts.length} charts, drawn in ${drawnMs} ms, screenshot ${shot}`);
  for (const p of problems) console.log(`  ${p}`);
  failures += problems.length ? 1 : 0;
  await context.close();
}
await browser.close();
process.exit(failures ? 1 : 0);
