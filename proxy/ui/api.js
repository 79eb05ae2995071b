// The tenant-scoped session API, called with the key the user signed in with.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function makeApi(key) {
  return async function get(path) {
    const response = await fetch(path, { headers: { Authorization: `Bearer ${key}` }, cache: "no-store" });
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (!response.ok) {
      const message = body && body.error && body.error.message ? body.error.message : response.statusText;
      throw new ApiError(response.status, message);
    }
    return body;
  };
}

export function sessionPath(session, rest = "") {
  return `/v1/sessions/${encodeURIComponent(session)}${rest}`;
}
