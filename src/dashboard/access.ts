import type { IncomingMessage } from 'node:http';

/** What a dashboard request may do: nothing (403), read the pages, or also run actions (requeue, retry, reset). */
export type Access = 'none' | 'read' | 'write';

/**
 * CSRF: a POST is accepted only from a page of the same origin — `Sec-Fetch-Site: same-origin`
 * (every current browser sends it), or an `Origin` whose host is the request's. A POST with
 * neither header is refused: a form on another site cannot forge them.
 */
export function isSameOrigin(req: IncomingMessage): boolean {
  const site = req.headers['sec-fetch-site'];
  if (site === 'same-origin') return true;
  const origin = req.headers.origin;
  const host = req.headers.host;
  if (typeof origin !== 'string' || origin === 'null' || typeof host !== 'string') return false;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/** Whatever `authorize` returned, as an access level; anything unexpected means no access (fail closed). */
export function toAccess(value: unknown): Access {
  return value === 'read' || value === 'write' ? value : 'none';
}
