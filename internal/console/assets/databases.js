// Databases and tables: every database with its tables, a table's key,
// fields, schema versions and index build progress (#/databases/db/table,
// #/databases/db/table/version for one version's schema).
import * as api from './api.js';
import { h, table, progress, badge, json } from './ui.js';

export async function render(root, { params, signal }) {
  const [db, tbl, version] = params;
  if (db && tbl) return renderTable(root, db, tbl, version, signal);
  const { databases } = await api.get('/_schemas', { signal });
  root.append(h('h1', null, 'Databases and tables'));
  if (!databases.length) root.append(h('p', { class: 'muted' }, 'No databases yet.'));
  for (const d of databases) {
    root.append(h('section', { dataset: { db: d.name } },
      h('h2', null, d.name),
      h('p', { class: 'muted' }, `${d.partitions} partitions · ${d.replicas} replica(s) · ${d.partitioner} partitioner`),
      table([
        { label: 'table', get: t => h('a', { href: `#/databases/${api.seg(d.name)}/${api.seg(t.name)}` }, t.name) },
        { label: 'key', get: t => h('span', { class: 'mono' }, t.key.map(k => `${k.name}:${k.type}${k.autoIncrement ? '+' : ''}`).join(', ')) },
        { label: 'version', num: true, get: t => String(t.version) },
        { label: '', get: t => h('a', { href: `#/documents/${api.seg(d.name)}/${api.seg(t.name)}` }, 'browse') },
      ], d.tables, { key: t => t.name, empty: 'No tables.' })));
  }
}

async function renderTable(root, db, tbl, version, signal) {
  const t = await api.get(api.path('_schemas', db, tbl), { signal });
  root.append(h('h1', null, h('a', { href: '#/databases' }, 'Databases'), ` / ${db} / ${tbl}`),
    h('p', null, h('a', { href: `#/documents/${api.seg(db)}/${api.seg(tbl)}` }, 'Browse documents')));
  root.append(h('section', null, h('h2', null, 'Key'),
    table([
      { label: 'part', get: k => k.name },
      { label: 'type', get: k => k.type },
      { label: '', get: k => k.autoIncrement ? badge('autoIncrement', 'info') : '' },
    ], t.key)));
  root.append(h('section', { id: 'fields' }, h('h2', null, `Fields (version ${t.version})`),
    table([
      { label: 'field', get: f => h('span', { class: 'mono' }, f.name) },
      { label: 'type', get: f => h('span', { class: 'mono' }, typeName(f.type)) },
      { label: 'default', get: f => 'default' in f ? h('span', { class: 'mono' }, JSON.stringify(f.default)) : '' },
      { label: 'index', get: f => f.index ? badge(f.index, 'info') : '' },
    ], t.schema.fields, { key: f => f.name })));
  root.append(h('section', { id: 'indexes' }, h('h2', null, 'Indexes on this node\'s partitions'),
    table([
      { label: 'field', get: i => h('span', { class: 'mono' }, i.field) },
      { label: 'kind', get: i => i.kind },
      { label: 'state', get: i => badge(i.state, i.state === 'ready' ? 'ok' : 'warn') },
      { label: 'progress', get: i => progress(i.progress, `${i.done} / ${i.total}`) },
    ], t.indexes || [], { key: i => i.field, empty: 'No indexes.' })));
  root.append(h('section', { id: 'versions' }, h('h2', null, 'Schema versions'),
    table([
      { label: 'version', get: v => h('a', { href: `#/databases/${api.seg(db)}/${api.seg(tbl)}/${v.version}` }, String(v.version)) },
      { label: 'registered', get: v => new Date(v.created).toLocaleString() },
    ], [...t.versions].reverse(), { key: v => String(v.version) })));
  if (version) {
    const v = await api.get(api.path('_schemas', db, tbl, 'versions', version), { signal });
    root.append(h('section', { id: 'version' }, h('h2', null, `Version ${v.version}`), json(v.schema)));
  }
}

function typeName(t) {
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) return t.map(typeName).join(' | ');
  if (t.type === 'array') return `array<${typeName(t.items)}>`;
  if (t.type === 'map') return `map<${typeName(t.values)}>`;
  return t.name || t.type;
}
