// Datastreams: every datastream, and one's per-partition status (owner,
// checkpoint, lag, throughput, errors) refreshed every 2 s, with pause
// and resume of the whole stream or of one partition (#/datastreams/name).
import * as api from './api.js';
import { h, fill, table, badge, fmtNum, fmtDuration, since, errorBox } from './ui.js';

const stateKind = { running: 'ok', paused: 'warn', 'partially-paused': 'warn', 'auto-paused': 'bad', unassigned: 'bad' };

export async function render(root, { params, signal }) {
  const list = h('section', { id: 'datastream-list' });
  const detail = h('div', { id: 'datastream' });
  root.append(h('h1', null, 'Datastreams'), list, detail);
  const name = params[0];

  async function drawList() {
    const { datastreams } = await api.get('/_datastreams', { signal });
    fill(list, table([
      { label: 'name', get: d => h('a', { href: '#/datastreams/' + api.seg(d.name) }, d.name) },
      { label: 'database', get: d => d.database },
      { label: 'tables', get: d => (d.tables || ['all']).join(', ') },
      { label: 'state', get: d => badge(d.state, stateKind[d.state]) },
      { label: 'paused partitions', get: d => d.pausedPartitions.join(', ') || '–' },
      { label: 'sink', get: d => h('span', { class: 'mono' }, `${d.sink.type} ${d.sink.brokers.join(',')} (${d.sink.format || 'json'})`) },
      { label: 'updated', get: d => since(d.updated) + ' ago' },
    ], datastreams, { key: d => d.name, empty: 'No datastreams. Create one with `doppio datastream create`.' }));
  }

  async function act(verb, partition) {
    const q = partition == null ? '' : '?partitions=' + partition;
    try {
      await api.post(api.path('_datastreams', name, verb) + q, undefined, { signal });
      await refresh();
    } catch (err) {
      if (err.name !== 'AbortError') detail.prepend(errorBox(err));
    }
  }

  async function drawDetail() {
    const st = await api.get(api.path('_datastreams', name, 'status'), { signal });
    const paused = st.partitions.filter(p => p.state === 'paused').length;
    fill(detail, h('section', { dataset: { state: st.state } },
      h('h2', null, `${st.name} → `, st.database, ' ', badge(st.state, stateKind[st.state]), ' ',
        h('span', { class: 'muted', id: 'datastream-paused' }, `${paused} of ${st.partitions.length} partition(s) paused`)),
      h('div', { class: 'row' },
        h('button', { type: 'button', id: 'datastream-pause', onclick: () => act('pause') }, 'Pause all'),
        h('button', { type: 'button', id: 'datastream-resume', class: 'secondary', onclick: () => act('resume') }, 'Resume all')),
      table([
        { label: 'partition', num: true, get: p => String(p.partition) },
        { label: 'state', get: p => h('span', { class: 'state' }, badge(p.state, stateKind[p.state])) },
        { label: 'owner', get: p => p.owner || '–' },
        { label: 'source', get: p => p.source || '–' },
        { label: 'checkpoint', get: p => h('span', { class: 'mono' }, p.checkpoint || '–') },
        { label: 'latest', get: p => h('span', { class: 'mono' }, p.latest || '–') },
        { label: 'lag (txns)', num: true, get: p => fmtNum(p.lag.transactions) },
        { label: 'lag', num: true, get: p => fmtDuration(p.lag.seconds) },
        { label: 'events/s', num: true, get: p => fmtNum(p.throughput, 1) },
        { label: 'delivered', num: true, get: p => fmtNum(p.delivered) },
        { label: 'failures', num: true, get: p => String(p.failures) },
        { label: 'last error', get: p => p.lastError ? h('span', { title: p.lastError.at }, p.lastError.message) : (p.detail || '') },
        { label: '', get: p => p.state === 'paused' || p.state === 'auto-paused'
          ? h('button', { type: 'button', class: 'secondary', onclick: () => act('resume', p.partition) }, 'Resume')
          : h('button', { type: 'button', class: 'secondary', onclick: () => act('pause', p.partition) }, 'Pause') },
      ], st.partitions, { key: p => String(p.partition) })));
  }

  async function refresh() {
    await drawList();
    if (name) await drawDetail();
  }
  await refresh();
  const timer = setInterval(() => refresh().catch(err => {
    if (err.name !== 'AbortError') detail.prepend(errorBox(err));
  }), 2000);
  return () => clearInterval(timer);
}
