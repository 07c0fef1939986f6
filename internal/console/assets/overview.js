// Overview: nodes, partitions and their leaders, lag, rebalance progress
// and the conditions that need an operator, from GET /_cluster.
import * as api from './api.js';
import { h, fill, table, progress, badge, card, since, fmtNum, colour, errorBox } from './ui.js';

// A replica this many log entries behind its leader is called lagging.
const lagWarn = 1000;

// conditions derives what needs attention from one /_cluster answer,
// worst first: [{level: bad|warn|info, text}].
export function conditions(c) {
  const out = [];
  for (const n of c.nodes) {
    if (n.state !== 'alive') out.push({ level: 'bad', text: `node ${n.id} is ${n.state}: replicas are placed on it but it is not registered` });
    if (n.intent === 'draining') out.push({ level: 'info', text: `node ${n.id} is draining` });
  }
  const versions = new Set(c.nodes.map(n => n.version).filter(Boolean));
  if (versions.size > 1) out.push({ level: 'warn', text: `mixed versions: ${[...versions].join(', ')}` });
  const noLeader = c.partitions.filter(p => !p.leader);
  if (noLeader.length) out.push({ level: 'bad', text: `${noLeader.length} partition(s) without a leader: ${names(noLeader)}` });
  const under = c.partitions.filter(underReplicated);
  if (under.length) out.push({ level: 'warn', text: `${under.length} partition(s) under-replicated: ${names(under)}` });
  const lagging = c.partitions.filter(p => maxLag(p) > lagWarn);
  if (lagging.length) out.push({ level: 'warn', text: `${lagging.length} partition(s) with a replica more than ${lagWarn} entries behind: ${names(lagging)}` });
  const failedChecks = c.partitions.filter(p => p.check && p.check.last && p.check.last.result !== 'consistent');
  if (failedChecks.length) out.push({ level: 'warn', text: `${failedChecks.length} partition(s) whose last consistency check was not consistent: ${names(failedChecks)}` });
  if (c.rebalance && c.rebalance.active) out.push({ level: 'info', text: `rebalance in progress: ${c.rebalance.done} of ${c.rebalance.total} moves done` });
  if (!c.controller) out.push({ level: 'bad', text: 'no placement controller is elected' });
  if (c.insecure) out.push({ level: 'warn', text: 'this node runs without TLS (insecure mode)' });
  return out;
}

function names(ps) {
  const shown = ps.slice(0, 8).map(p => `${p.database}/${p.partition}`).join(', ');
  return ps.length > 8 ? shown + ', …' : shown;
}

// underReplicated: fewer of the placed replicas are healthy voters than
// the placement asks for.
function underReplicated(p) {
  const healthy = (p.members || []).filter(m => (m.role === 'leader' || m.role === 'follower') && p.replicas.includes(m.node));
  return healthy.length < p.replicas.length;
}

// The partition grid is one canvas, a cell per partition coloured by its
// leader: a thousand elements (or a hundred thousand at scale) cost the
// browser more to build and lay out than everything else on the page.
const cell = 12, gap = 2, step = cell + gap;

function partitionGrid(db, ps, rank, width, pick) {
  const cols = Math.max(10, Math.floor((width || 700) / step));
  const rows = Math.ceil(ps.length / cols);
  const dpr = window.devicePixelRatio || 1;
  const canvas = h('canvas', { class: 'grid', role: 'img', 'aria-label': `${ps.length} partitions of ${db} by leader`, dataset: { db } });
  canvas.width = cols * step * dpr;
  canvas.height = Math.max(1, rows * step * dpr);
  canvas.style.width = `${cols * step}px`;
  const css = getComputedStyle(document.documentElement);
  const bad = css.getPropertyValue('--bad').trim(), warn = css.getPropertyValue('--warn').trim();
  const ctx = canvas.getContext('2d');
  ctx.scale(dpr, dpr);
  ctx.lineWidth = 2;
  let drawn = 0;
  ps.forEach((p, i) => {
    const x = (i % cols) * step, y = Math.floor(i / cols) * step;
    const r = rank.get(p.leader);
    ctx.fillStyle = !p.leader ? bad : r == null ? '#cbd5e0' : colour(r);
    ctx.fillRect(x, y, cell, cell);
    if (underReplicated(p)) {
      ctx.strokeStyle = warn;
      ctx.strokeRect(x + 1, y + 1, cell - 2, cell - 2);
    }
    drawn++;
  });
  canvas.dataset.cells = drawn;
  const at = e => {
    // The canvas may be drawn narrower than its pixels (max-width).
    const b = canvas.getBoundingClientRect();
    const col = Math.floor((e.clientX - b.left) / b.width * cols), row = Math.floor((e.clientY - b.top) / b.height * rows);
    const i = row * cols + col;
    return col >= 0 && col < cols && i >= 0 && i < ps.length ? i : -1;
  };
  canvas.addEventListener('mousemove', e => {
    const i = at(e);
    canvas.title = i < 0 ? '' : `${db}/${ps[i].partition} leader ${ps[i].leader || 'none'} scn ${ps[i].scn}`;
  });
  canvas.addEventListener('click', e => {
    const i = at(e);
    if (i >= 0) pick(i);
  });
  return canvas;
}

function maxLag(p) { return Math.max(0, ...(p.members || []).map(m => m.lag ?? 0)); }

export async function render(root, { signal }) {
  const cards = h('div', { class: 'cards', id: 'summary' });
  const alerts = h('section', { id: 'alerts' });
  const nodes = h('section', { id: 'nodes' });
  const rebalance = h('section', { id: 'rebalance' });
  const parts = h('section', { id: 'partitions' });
  const detail = h('div', { id: 'partition-detail' });
  const status = h('p', { class: 'muted' });
  root.append(h('h1', null, 'Cluster overview'), status, cards, alerts, nodes, rebalance, parts);
  let selected = null;
  let last = null;

  function draw(c) {
    last = c;
    const order = c.nodes.map(n => n.id);
    const alive = c.nodes.filter(n => n.state === 'alive').length;
    const dbs = new Set(c.partitions.map(p => p.database));
    fill(cards, 
      card('nodes alive', `${alive} / ${c.nodes.length}`, { id: 'card-nodes', dataset: { count: c.nodes.length, alive } }),
      card('partitions', String(c.partitions.length), { id: 'card-partitions', dataset: { count: c.partitions.length } }),
      card('databases', String(dbs.size)),
      card('without leader', String(c.partitions.filter(p => !p.leader).length), { id: 'card-leaderless' }),
      card('under-replicated', String(c.partitions.filter(underReplicated).length)),
      card('controller', c.controller || 'none'));
    const conds = conditions(c);
    fill(alerts, h('h2', null, 'Conditions'), conds.length
      ? conds.map(a => h('div', { class: 'alert ' + a.level }, a.text))
      : h('p', { class: 'muted' }, 'Nothing needs attention.'));
    const hasVersion = c.nodes.some(n => n.version);
    fill(nodes, h('h2', null, 'Nodes'), table([
      { label: 'node', get: n => [h('span', { class: 'swatch', style: null, dataset: { i: order.indexOf(n.id) } }), n.id] },
      { label: 'REST', get: n => h('span', { class: 'mono' }, n.http) },
      { label: 'zone', get: n => n.zone || '–' },
      ...(hasVersion ? [{ label: 'version', get: n => n.version || '–' }] : []),
      { label: 'state', get: n => badge(n.state, n.state === 'alive' ? 'ok' : 'bad') },
      { label: 'intent', get: n => badge(n.intent, n.intent === 'active' ? 'ok' : 'info') },
      { label: 'leads', num: true, get: n => String(n.leads) },
      { label: 'follows', num: true, get: n => String(n.follows) },
      { label: 'up', get: n => since(n.started) },
    ], c.nodes, { key: n => n.id }));
    nodes.querySelectorAll('.swatch').forEach(el => { el.style.background = colour(Number(el.dataset.i)); });
    const r = c.rebalance;
    fill(rebalance, h('h2', null, 'Rebalance'), r
      ? [h('div', { class: 'row' }, badge(r.active ? 'active' : 'settled', r.active ? 'info' : 'ok'),
        progress(r.total ? r.done / r.total : 1, `${r.done} / ${r.total} moves`),
        h('span', { class: 'muted' }, `${r.inFlight} in flight, at most ${r.maxMoves}${r.maxMovesPerNode ? `, ${r.maxMovesPerNode} per node` : ''}`)),
      r.moving && r.moving.length ? h('p', { class: 'mono' }, r.moving.join(', ')) : null]
      : h('p', { class: 'muted' }, 'The controller has not reported a rebalance yet.'));
    drawPartitions(c, order);
  }

  function drawPartitions(c, order) {
    const byDb = new Map();
    for (const p of c.partitions) {
      if (!byDb.has(p.database)) byDb.set(p.database, []);
      byDb.get(p.database).push(p);
    }
    const legend = h('div', { class: 'legend' }, order.map((id, i) => {
      const sw = h('span', { class: 'swatch' });
      sw.style.background = colour(i);
      return h('span', null, sw, `led by ${id}`);
    }), h('span', null, badge('no leader', 'bad')), h('span', null, badge('under-replicated', 'warn')));
    const rows = [];
    const rank = new Map(order.map((id, i) => [id, i]));
    for (const [db, ps] of byDb) {
      const grid = partitionGrid(db, ps, rank, parts.clientWidth, i => { selected = [db, ps[i].partition]; drawDetail(); });
      const leaders = {};
      for (const p of ps) if (p.leader) leaders[p.leader] = (leaders[p.leader] || 0) + 1;
      rows.push(h('div', { class: 'panel', dataset: { db } },
        h('strong', null, db), ' ',
        h('span', { class: 'muted' }, `${ps.length} partitions · leaders ${Object.entries(leaders).map(([n, k]) => `${n}: ${k}`).join(', ') || 'none'} · max lag ${fmtNum(Math.max(0, ...ps.map(maxLag)))}`),
        grid));
    }
    fill(parts, h('h2', null, 'Partitions and leaders'), legend, rows.length ? rows : h('p', { class: 'muted' }, 'No databases yet.'), detail);
    drawDetail();
  }

  function drawDetail() {
    if (!selected || !last) return fill(detail);
    const p = last.partitions.find(x => x.database === selected[0] && x.partition === selected[1]);
    if (!p) return fill(detail);
    fill(detail, h('h2', null, `Partition ${p.database}/${p.partition}`),
      h('p', null, `leader ${p.leader || 'none'} · term ${p.term} · SCN ${p.scn || '–'} · placed on ${p.replicas.join(', ')}`),
      table([
        { label: 'node', get: m => m.node },
        { label: 'role', get: m => badge(m.role, m.role === 'leader' ? 'info' : m.role === 'follower' ? 'ok' : 'warn') },
        { label: 'SCN', get: m => m.scn || '–' },
        { label: 'applied index', num: true, get: m => String(m.appliedIndex) },
        { label: 'lag (entries)', num: true, get: m => m.lag == null ? '–' : String(m.lag) },
      ], p.members || []));
  }

  async function refresh() {
    draw(await api.get('/_cluster', { signal }));
    status.textContent = `As of ${new Date().toLocaleTimeString()}, from the node serving this page; refreshed every 3 s.`;
  }
  await refresh();
  const timer = setInterval(() => refresh().catch(err => {
    if (err.name !== 'AbortError') fill(status, errorBox(err));
  }), 3000);
  return () => clearInterval(timer);
}
