/*
 * charts.js: live charts (uPlot) of what the gateway is doing, per target, over the last minutes,
 * from its Prometheus /metrics, read every CHART_POLL_MS while the tab is visible:
 *
 *   generated tokens/s   the rise of sipp_generated_tokens_total over the interval
 *   TTFT (ms)            the mean time to first token of the requests that started generating in
 *                        the interval (sipp_ttft_seconds_sum and _count)
 *   requests             sipp_engine_running_requests and sipp_engine_queued_requests
 *   KV cache use (%)     sipp_kv_cache_usage_ratio
 *
 * An interval with no new request has no TTFT (a gap, not a zero). Each chart's element carries
 * data-points, the number of values it has drawn, for people and tests that ask. The speed of the
 * page's last answer (its own measurement, docs/web.md) is shown beside them.
 */

const CHART_POLL_MS = 2000;
const CHART_KEEP = 150; // points: five minutes at CHART_POLL_MS
const CHART_HEIGHT = 180;
const SERIES_COLOURS = ['#2f6f5e', '#1f55a6', '#a12b22', '#8a5a00', '#8a2a8f', '#4b6b00'];

const CHARTS = [
  { key: 'tokens', title: 'Generated tokens/s', unit: 'tok/s' },
  { key: 'ttft', title: 'Time to first token (ms)', unit: 'ms' },
  { key: 'requests', title: 'Requests running / queued', unit: '' },
  { key: 'kv', title: 'KV cache use (%)', unit: '%' },
];

const live = { timer: 0, last: null, times: [], targets: [], series: new Map(), plots: new Map(), shown: false };

/* Prometheus text as {name: {target: value}} for the names the charts use. */
function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^(sipp_[a-z_]+)\{target="([^"]*)"\} (\S+)$/.exec(line);
    if (!m || !m[2]) continue;
    (out[m[1]] = out[m[1]] || {})[m[2]] = Number(m[3]);
  }
  return out;
}

/* One point per chart and target from two readings dt seconds apart. */
function pointsOf(now, before, dt, target) {
  const v = (name, r = now) => (r[name] || {})[target];
  const delta = (name) => (before && v(name, before) !== undefined ? v(name) - v(name, before) : null);
  const toks = delta('sipp_generated_tokens_total');
  const n = delta('sipp_ttft_seconds_count');
  const sum = delta('sipp_ttft_seconds_sum');
  const kv = v('sipp_kv_cache_usage_ratio');
  return {
    tokens: toks === null ? null : Math.max(0, toks) / dt,
    ttft: n > 0 ? (1000 * sum) / n : null,
    running: v('sipp_engine_running_requests') ?? null,
    queued: v('sipp_engine_queued_requests') ?? null,
    kv: kv === undefined ? null : 100 * kv,
  };
}

function seriesOf(target) {
  if (!live.series.has(target)) {
    const pad = () => live.times.map(() => null);
    live.series.set(target, { tokens: pad(), ttft: pad(), running: pad(), queued: pad(), kv: pad() });
  }
  return live.series.get(target);
}

async function pollMetrics() {
  clearTimeout(live.timer);
  live.timer = setTimeout(pollMetrics, CHART_POLL_MS);
  if (document.hidden) return;
  let now;
  try {
    const res = await fetch('/metrics', { cache: 'no-store' });
    if (!res.ok) return;
    now = parseMetrics(await res.text());
  } catch (_) {
    return; // the status strip says when the gateway is unreachable
  }
  const t = Date.now() / 1000;
  const dt = live.last ? Math.max(t - live.last.t, 0.001) : CHART_POLL_MS / 1000;
  const targets = Object.keys(now.sipp_generated_tokens_total || now.sipp_engine_slots || {});
  for (const name of targets) seriesOf(name);
  live.times.push(t);
  for (const [name, s] of live.series) {
    const p = pointsOf(now, live.last && live.last.m, dt, name);
    for (const k of Object.keys(s)) s[k].push(p[k]);
  }
  if (live.times.length > CHART_KEEP) {
    live.times.shift();
    for (const s of live.series.values()) for (const k of Object.keys(s)) s[k].shift();
  }
  live.last = { t, m: now };
  if (live.shown) drawCharts();
}

/* The chart's columns for uPlot: times, then one series per target (two for requests). */
function chartData(key) {
  const cols = [live.times];
  const labels = [];
  for (const [name, s] of live.series) {
    if (key === 'requests') {
      cols.push(s.running, s.queued);
      labels.push(`${name} running`, `${name} queued`);
    } else {
      cols.push(s[key]);
      labels.push(name);
    }
  }
  return { cols, labels };
}

function chartWidth(el) {
  return Math.max(240, Math.floor(el.clientWidth || 320) - 8);
}

function drawCharts() {
  const host = document.getElementById('charts');
  for (const c of CHARTS) {
    const { cols, labels } = chartData(c.key);
    let entry = live.plots.get(c.key);
    const sig = labels.join('|');
    if (!entry || entry.sig !== sig) {
      if (entry) entry.plot.destroy();
      const box = entry ? entry.box : chartBox(host, c);
      const opts = {
        width: chartWidth(box), height: CHART_HEIGHT, legend: { show: true },
        series: [{}, ...labels.map((l, i) => ({ label: l, stroke: SERIES_COLOURS[i % SERIES_COLOURS.length], width: 2, spanGaps: false }))],
        axes: [{ stroke: 'currentColor' }, { stroke: 'currentColor', size: 56 }],
        // From zero, and at least to 1: an idle target is a flat line at the bottom, not mid-chart.
        scales: { y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
      };
      entry = { sig, box, plot: new uPlot(opts, cols, box.querySelector('.plot')) };
      live.plots.set(c.key, entry);
    } else {
      entry.plot.setData(cols);
    }
    const points = cols.slice(1).reduce((n, col) => n + col.filter((v) => v !== null && v !== undefined).length, 0);
    entry.box.dataset.points = String(points);
  }
}

function chartBox(host, c) {
  const box = document.createElement('figure');
  box.className = 'chart';
  box.dataset.testid = `chart-${c.key}`;
  box.dataset.points = '0';
  const cap = document.createElement('figcaption');
  cap.textContent = c.title;
  const plot = document.createElement('div');
  plot.className = 'plot';
  plot.setAttribute('role', 'img');
  plot.setAttribute('aria-label', `${c.title}, per target, over the last minutes`);
  box.append(cap, plot);
  host.append(box);
  return box;
}

function showCharts() {
  live.shown = true;
  drawCharts();
}

/* The page's own last answer, beside the charts. */
function showLastSpeed(text) {
  document.getElementById('last-speed').textContent = text;
}

function startCharts() {
  for (const b of document.querySelectorAll('nav.views button'))
    b.addEventListener('click', () => (live.shown = b.dataset.view === 'charts'));
  window.addEventListener('resize', () => {
    for (const e of live.plots.values()) e.plot.setSize({ width: chartWidth(e.box), height: CHART_HEIGHT });
  });
  pollMetrics();
}
