// Charts of the key metrics of the node serving the console: its
// /metrics (Prometheus text) scraped every 2 s and parsed here, rates and
// means taken between scrapes, five minutes kept.
import * as api from './api.js';
import { h, fill, lineChart, fmtNum, fmtBytes, fmtDuration, select, errorBox } from './ui.js';

const every = 2000;
const history = 150;

// parse reads Prometheus text exposition into {types, samples}: samples
// as [{name, labels, value}].
export function parse(text) {
  const types = {};
  const samples = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types[name] = type;
      continue;
    }
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return { types, samples };
}

// sum adds the samples of name that where admits: NaN when the node
// exposes no sample of name at all, 0 when where admits none.
function sum(scrape, name, where) {
  let total = 0, found = false;
  for (const s of scrape.samples) {
    if (s.name !== name) continue;
    found = true;
    if (!where || where(s.labels)) total += s.value;
  }
  return found ? total : NaN;
}

// The key charts: value(prev, cur, seconds) of two consecutive scrapes.
const charts = [
  { title: 'Requests / s', fmt: fmtNum, value: rate('doppio_http_requests_total') },
  { title: 'Server errors (5xx) / s', fmt: fmtNum, value: rate('doppio_http_requests_total', l => l.code && l.code[0] === '5') },
  { title: 'Mean request latency', fmt: fmtDuration, value: mean('doppio_http_request_duration_seconds') },
  { title: 'Mean Raft commit latency', fmt: fmtDuration, value: mean('doppio_replication_commit_seconds') },
  { title: 'Row cache hit ratio', fmt: v => (v * 100).toFixed(1) + ' %', value: (a, b) => {
    const hits = sum(b, 'doppio_row_cache_hits_total') - sum(a, 'doppio_row_cache_hits_total');
    const misses = sum(b, 'doppio_row_cache_misses_total') - sum(a, 'doppio_row_cache_misses_total');
    return hits + misses > 0 ? hits / (hits + misses) : Number.isNaN(hits + misses) ? NaN : null;
  } },
  { title: 'Disk used', fmt: fmtBytes, value: gauge('doppio_storage_disk_bytes') },
  { title: 'Compaction debt', fmt: fmtBytes, value: gauge('doppio_storage_compaction_debt_bytes') },
  { title: 'Change events to Kafka / s', fmt: fmtNum, value: rate('doppio_datastream_events_produced_total') },
  { title: 'CPU (cores)', fmt: fmtNum, value: rate('process_cpu_seconds_total') },
  { title: 'Heap in use', fmt: fmtBytes, value: gauge('go_memstats_heap_alloc_bytes') },
  { title: 'Goroutines', fmt: fmtNum, value: gauge('go_goroutines') },
];

function rate(name, where) { return (a, b, dt) => (sum(b, name, where) - sum(a, name, where)) / dt; }
function gauge(name) { return (a, b) => sum(b, name); }
function mean(name) {
  return (a, b) => {
    const n = sum(b, name + '_count') - sum(a, name + '_count');
    return n > 0 ? (sum(b, name + '_sum') - sum(a, name + '_sum')) / n : Number.isNaN(n) ? NaN : null;
  };
}

export async function render(root, { signal }) {
  const info = h('p', { class: 'muted', id: 'metrics-info' });
  const grid = h('div', { class: 'charts', id: 'charts' });
  const pick = h('div', { class: 'row' });
  const custom = [];
  root.append(h('h1', null, 'Metrics'), info, grid, h('h2', null, 'Any metric'), pick);
  const series = charts.map(() => []);
  let prev = null;
  let families = [];

  function drawCharts() {
    fill(grid, ...[...charts, ...custom].map((c, i) => {
      const pts = i < charts.length ? series[i] : c.points;
      // null: nothing observed between the last two scrapes.
      const last = pts.length ? pts[pts.length - 1].v : undefined;
      const now = Number.isFinite(last) ? c.fmt(last)
        : h('span', { class: 'muted' }, last === undefined ? 'collecting…' : last === null ? 'nothing observed' : 'not exposed');
      return h('div', { class: 'chart', dataset: { title: c.title } },
        h('h3', null, c.title), h('div', { class: 'now' }, now),
        lineChart(pts));
    }));
  }

  async function scrape() {
    const t0 = performance.now();
    const text = await api.get('/metrics', { signal });
    const took = performance.now() - t0;
    const cur = parse(text);
    cur.t = Date.now();
    if (prev) {
      const dt = (cur.t - prev.t) / 1000;
      charts.forEach((c, i) => push(series[i], { t: cur.t, v: c.value(prev, cur, dt) }));
      for (const c of custom) push(c.points, { t: cur.t, v: c.value(prev, cur, dt) });
    }
    prev = cur;
    info.textContent = `/metrics of the node serving this page: ${cur.samples.length} series, ${fmtBytes(text.length)}, fetched in ${took.toFixed(0)} ms; every ${every / 1000} s.`;
    const names = Object.keys(cur.types).sort();
    if (names.join() !== families.join()) {
      families = names;
      drawPicker(cur.types);
    }
    drawCharts();
  }

  function drawPicker(types) {
    const sel = select({ id: 'metric-pick' }, families.map(n => [n, `${n} (${types[n]})`]));
    fill(pick, h('label', null, 'metric', sel), h('button', { type: 'button', onclick: () => {
      const name = sel.value, type = types[name];
      const value = type === 'counter' ? rate(name) : type === 'histogram' || type === 'summary' ? mean(name) : gauge(name);
      custom.push({ title: name + (type === 'counter' ? ' / s' : type === 'histogram' ? ' (mean)' : ''), fmt: fmtNum, value, points: [] });
      drawCharts();
    } }, 'Chart it'));
  }

  await scrape();
  const timer = setInterval(() => scrape().catch(err => {
    if (err.name !== 'AbortError') fill(info, errorBox(err));
  }), every);
  return () => clearInterval(timer);
}

function push(pts, p) {
  pts.push(p);
  if (pts.length > history) pts.shift();
}
