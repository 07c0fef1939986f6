// Long operations with their progress: backups and restores running on
// the nodes, consistency checks (running, last outcome, and one started
// from here), the rebalance, and bulk loads where the cluster has them.
import * as api from './api.js';
import { h, fill, table, progress, badge, fmtBytes, since, select, errorBox } from './ui.js';

export async function render(root, { signal }) {
  const transfers = h('section', { id: 'transfers' });
  const checks = h('section', { id: 'checks' });
  const rebalance = h('section', { id: 'ops-rebalance' });
  const bulk = h('div', { id: 'bulk' });
  const runner = h('section', { id: 'check-run' });
  root.append(h('h1', null, 'Long operations'), transfers, checks, runner, rebalance, bulk);

  function draw(c) {
    fill(transfers, h('h2', null, 'Backups and restores running'), table([
      { label: 'kind', get: t => badge(t.kind, 'info') },
      { label: 'partition', get: t => `${t.db}/${t.partition}` },
      { label: 'node', get: t => t.node },
      { label: 'bytes so far', num: true, get: t => fmtBytes(t.bytes) },
      { label: 'running for', get: t => since(t.started) },
      { label: 'session', get: t => h('span', { class: 'mono' }, t.session || '–') },
    ], c.transfers || [], { empty: 'None running. Start one with `doppio backup` or `doppio restore`.' }));
    const withCheck = c.partitions.filter(p => p.check);
    const running = withCheck.filter(p => p.check.running);
    const results = {};
    for (const p of withCheck) if (p.check.last) results[p.check.last.result] = (results[p.check.last.result] || 0) + 1;
    fill(checks, h('h2', null, 'Consistency checks'),
      h('p', { class: 'muted', id: 'check-summary' }, Object.keys(results).length
        ? 'Last outcome per partition: ' + Object.entries(results).map(([r, n]) => `${r} ${n}`).join(', ')
        : 'No partition has been checked yet.'),
      running.length ? table([
        { label: 'partition', get: p => `${p.database}/${p.partition}` },
        { label: 'leader', get: p => p.leader },
        { label: 'progress', get: p => progress(p.check.last && p.check.last.bytes ? p.check.summedBytes / p.check.last.bytes : 0,
          fmtBytes(p.check.summedBytes) + (p.check.last ? ' of ~' + fmtBytes(p.check.last.bytes) : '')) },
        { label: 'running for', get: p => since(p.check.started) },
      ], running) : null,
      table([
        { label: 'partition', get: p => `${p.database}/${p.partition}` },
        { label: 'result', get: p => badge(p.check.last.result, p.check.last.result === 'consistent' ? 'ok' : 'bad') },
        { label: 'keys', num: true, get: p => String(p.check.last.keys) },
        { label: 'bytes', num: true, get: p => fmtBytes(p.check.last.bytes) },
        { label: 'at', get: p => since(p.check.last.at) + ' ago' },
        { label: 'error', get: p => p.check.last.error || '' },
      ], withCheck.filter(p => p.check.last && p.check.last.result !== 'consistent'), { empty: 'No partition failed its last check.' }));
    const r = c.rebalance;
    fill(rebalance, h('h2', null, 'Rebalance'), r
      ? h('div', { class: 'row' }, badge(r.active ? 'active' : 'settled', r.active ? 'info' : 'ok'),
        progress(r.total ? r.done / r.total : 1, `${r.done} / ${r.total} moves`),
        h('span', { class: 'muted' }, r.active ? `started ${since(r.started)} ago` : `finished ${since(r.finished)} ago`))
      : h('p', { class: 'muted' }, 'No rebalance reported.'));
  }

  const dbs = [...new Set((await api.get('/_schemas', { signal })).databases.map(d => d.name))];
  const dbSel = select({ id: 'check-db' }, dbs);
  const out = h('div', { id: 'check-result' });
  const button = h('button', { type: 'button', id: 'check-start' }, 'Check');
  button.addEventListener('click', async () => {
    button.disabled = true;
    fill(out, h('p', { class: 'muted' }, 'Checking; progress shows above as partitions are summed…'));
    try {
      const res = await api.post(api.path('_cluster', 'check', dbSel.value), undefined, { signal });
      fill(out, h('p', { dataset: { result: res.result } }, 'Result: ', badge(res.result, res.result === 'consistent' ? 'ok' : 'bad'),
        ` over ${res.partitions.length} partition(s)`));
    } catch (err) {
      if (err.name !== 'AbortError') fill(out, errorBox(err));
    } finally {
      button.disabled = false;
    }
  });
  runner.append(h('h2', null, 'Run a consistency check'),
    dbs.length ? h('div', { class: 'row' }, h('label', null, 'database', dbSel), button) : h('p', { class: 'muted' }, 'No databases.'), out);

  async function refresh() {
    draw(await api.get('/_cluster', { signal }));
  }
  await Promise.all([refresh(), drawBulk(bulk, signal)]);
  const timer = setInterval(() => Promise.all([refresh(), drawBulk(bulk, signal)]).catch(err => {
    if (err.name !== 'AbortError') transfers.prepend(errorBox(err));
  }), 2000);
  return () => clearInterval(timer);
}

// drawBulk shows the bulk loads (GET /_bulk/loads) when the cluster
// serves them, and nothing when it does not.
async function drawBulk(el, signal) {
  let body;
  try {
    body = await api.get('/_bulk/loads', { signal });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    fill(el);
    return;
  }
  try {
    fill(el, bulkLoads(body.loads || []));
  } catch (err) {
    fill(el, errorBox(err)); // an answer of another shape: the rest of the page still works
  }
}

function bulkLoads(loads) {
  const kind = { done: 'ok', loading: 'info', verifying: 'info', cancelled: 'warn', failed: 'bad' };
  return h('section', null, h('h2', null, 'Bulk loads'), table([
    { label: 'load', get: l => h('span', { class: 'mono', title: l.id }, String(l.id).slice(0, 12)) },
    { label: 'into', get: l => `${l.database}.${l.table} (v${l.schemaVersion})` },
    { label: 'state', get: l => badge(l.state, kind[l.state]) },
    { label: 'progress', get: l => progress(l.totalBytes ? l.bytes / l.totalBytes : l.state === 'done' ? 1 : 0,
      `${fmtBytes(l.bytes)} / ${fmtBytes(l.totalBytes)} · ${l.partitionsDone} / ${l.totalPartitions} partitions`) },
    { label: 'documents', num: true, get: l => `${l.records} / ${l.totalRecords}` },
    { label: 'started', get: l => since(l.created) + ' ago' },
    { label: 'error', get: l => l.error || '' },
  ], loads, { key: l => l.id, empty: 'No bulk loads. Start one with `doppio bulk load`.' }));
}
