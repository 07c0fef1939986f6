// The console's only way to the cluster: the public REST API, with the
// session token of a login (secure mode) kept in this tab's sessionStorage.

const tokenKey = 'doppio.session';

// ApiError is a refused or failed request: its HTTP status and the
// problem+json body the server answered.
export class ApiError extends Error {
  constructor(status, problem) {
    super(`${status} ${problem.title || ''}${problem.detail ? ': ' + problem.detail : ''}`);
    this.status = status;
    this.problem = problem;
  }
}

export function session() {
  try { return JSON.parse(sessionStorage.getItem(tokenKey)); } catch { return null; }
}

export function logout() { sessionStorage.removeItem(tokenKey); }

// login exchanges a password for a session token (POST /_auth/login).
export async function login(user, password) {
  const res = await fetch('/_auth/login', {
    method: 'POST', credentials: 'omit', cache: 'no-store',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ user, password }),
  });
  if (!res.ok) throw await problemOf(res);
  const s = await res.json();
  sessionStorage.setItem(tokenKey, JSON.stringify({ user, token: s.token, expires: s.expires }));
}

function headersFor(extra) {
  const hs = new Headers(extra || {});
  const s = session();
  if (s && s.token) hs.set('Authorization', 'Bearer ' + s.token);
  return hs;
}

async function problemOf(res) {
  let p;
  try { p = await res.json(); } catch { p = { title: res.statusText || 'Error' }; }
  return new ApiError(res.status, p);
}

// fetchRaw sends a request and returns the Response, failing with an
// ApiError on any status but 2xx and 304. Credentials are omitted so a
// 401's Basic challenge never opens the browser's own password dialog.
export async function fetchRaw(method, path, { body, headers, signal } = {}) {
  const hs = headersFor(headers);
  let payload;
  if (body !== undefined) {
    hs.set('Content-Type', 'application/json');
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const res = await fetch(path, { method, headers: hs, body: payload, signal, credentials: 'omit', cache: 'no-store' });
  if (!res.ok && res.status !== 304) throw await problemOf(res);
  return res;
}

// request returns {status, headers, body}, the body decoded when JSON.
export async function request(method, path, opts) {
  const res = await fetchRaw(method, path, opts);
  const ct = res.headers.get('Content-Type') || '';
  const body = ct.includes('json') ? await res.json() : await res.text();
  return { status: res.status, headers: res.headers, body };
}

export async function get(path, opts) { return (await request('GET', path, opts)).body; }
export async function post(path, body, opts) { return (await request('POST', path, { ...opts, body })).body; }

// seg percent-encodes one path segment, parentheses and commas included,
// so a key part is never read as a multi-get list.
export function seg(s) {
  return encodeURIComponent(String(s)).replace(/[()!'*]/g, c => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

export function path(...segs) { return '/' + segs.map(seg).join('/'); }

// lines reads an NDJSON answer line by line, calling each with the
// decoded object, until the answer ends or signal aborts.
export async function lines(res, each) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) each(JSON.parse(line));
    }
  }
}
