// DOM builders, formatting and the small SVG charts the pages share.

// h builds an element: attributes (on* are listeners), then children
// (nodes, strings, arrays; null and false are skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  add(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
}

export function add(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const svgNS = 'http://www.w3.org/2000/svg';

function s(tag, attrs) {
  const el = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  return el;
}

// table renders rows under columns [{label, get(row), num}]; each row
// may name itself with key(row) (data-key), for tests and links.
export function table(columns, rows, { key, empty = 'None.' } = {}) {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', null,
    h('thead', null, h('tr', null, columns.map(c => h('th', { class: c.num ? 'num' : null }, c.label)))),
    h('tbody', null, rows.map(r => h('tr', { dataset: key ? { key: key(r) } : undefined },
      columns.map(c => h('td', { class: c.num ? 'num' : null }, c.get(r)))))));
}

// progress is a bar filled to fraction (0..1) with a label over it.
export function progress(fraction, label) {
  const f = Math.max(0, Math.min(1, Number.isFinite(fraction) ? fraction : 0));
  const bar = h('div', { class: 'bar' });
  bar.style.width = (f * 100).toFixed(1) + '%';
  return h('div', { class: 'progress', role: 'progressbar', 'aria-valuenow': Math.round(f * 100) },
    bar, h('div', { class: 'text' }, label ?? Math.round(f * 100) + '%'));
}

export function badge(text, kind) { return h('span', { class: 'badge ' + (kind || '') }, text); }

export function card(label, value, attrs) {
  return h('div', { class: 'card', ...attrs }, h('div', { class: 'value' }, value), h('div', { class: 'label' }, label));
}

export function errorBox(err) { return h('div', { class: 'error', role: 'alert' }, String(err.message || err)); }

export function fmtBytes(n) {
  if (n == null || !Number.isFinite(n)) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(Math.round(n))) + ' ' + u[i];
}

export function fmtNum(n, digits = 2) {
  if (n == null || !Number.isFinite(n)) return '–';
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return Number.isInteger(n) ? String(n) : n.toFixed(digits);
}

export function fmtDuration(seconds) {
  if (seconds == null || !Number.isFinite(seconds)) return '–';
  if (seconds < 1) return Math.round(seconds * 1000) + ' ms';
  if (seconds < 120) return seconds.toFixed(1) + ' s';
  if (seconds < 7200) return Math.round(seconds / 60) + ' min';
  if (seconds < 172800) return (seconds / 3600).toFixed(1) + ' h';
  return Math.round(seconds / 86400) + ' d';
}

// since is how long ago an RFC 3339 time was.
export function since(t) {
  if (!t) return '–';
  return fmtDuration((Date.now() - Date.parse(t)) / 1000);
}

// lineChart draws points [{t, v}] as a line over its own range.
export function lineChart(points, { width = 320, height = 90 } = {}) {
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none', role: 'img' });
  svg.append(s('line', { class: 'axis', x1: 0, y1: height - 1, x2: width, y2: height - 1 }));
  const pts = points.filter(p => Number.isFinite(p.v));
  if (pts.length < 2) return svg;
  const t0 = pts[0].t, t1 = pts[pts.length - 1].t;
  let lo = Math.min(0, ...pts.map(p => p.v)), hi = Math.max(...pts.map(p => p.v));
  if (hi === lo) hi = lo + 1;
  const x = t => ((t - t0) / (t1 - t0 || 1)) * width;
  const y = v => height - 2 - ((v - lo) / (hi - lo)) * (height - 6);
  const d = pts.map((p, i) => (i ? 'L' : 'M') + x(p.t).toFixed(1) + ' ' + y(p.v).toFixed(1)).join(' ');
  svg.append(s('path', { class: 'area', d: d + ` L${width} ${height} L0 ${height} Z` }));
  svg.append(s('path', { class: 'line', d }));
  return svg;
}

// palette colours a node by its position among the cluster's nodes.
const colours = ['#3182ce', '#38a169', '#805ad5', '#d69e2e', '#319795', '#dd6b20', '#d53f8c', '#5a67d8', '#718096'];
export function colour(i) { return colours[i % colours.length]; }

// select builds a <select> of options [value, label?].
export function select(attrs, options, current) {
  return h('select', attrs, options.map(o => {
    const [v, l] = Array.isArray(o) ? o : [o, o];
    return h('option', { value: v, selected: v === current }, l);
  }));
}

// json renders a value as indented JSON.
export function json(v) { return h('pre', null, JSON.stringify(v, null, 2)); }

// fill replaces an element's children with children (as h takes them).
export function fill(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}
