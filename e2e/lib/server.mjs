// The set-up the node end-to-end suites share (e2e/*.test.mjs and the
// dialect folders e2e/cartesia, e2e/elevenlabs, e2e/deepgram): the real
// voicesvc binary served from a temporary folder, its admin command, a
// workspace and its key, a TLS certificate. Node's own modules only, so
// that each suite imports it by relative path whatever its node_modules.
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const run = promisify(execFile);

// BIN is the binary under test: VOICESVC_BIN (as `make test` sets it),
// else the repository's bin/voicesvc.
export const BIN = process.env.VOICESVC_BIN || join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'voicesvc');

// ROOT is the public API's path under a server's base URL (docs/api.md).
export const ROOT = '/voice-svc/api/v1/public';

// Suite is a test file's temporary folder and the servers it starts;
// close stops them and removes the folder.
export class Suite {
  constructor(prefix) {
    this.dir = mkdtempSync(join(tmpdir(), prefix));
    this.servers = [];
  }

  // server is a voicesvc on its own SQLite store, NAME.db in the folder;
  // Kind is Server or a class that extends it.
  server(name = 'x', Kind = Server) {
    const s = new Kind('sqlite://' + join(this.dir, name + '.db'));
    this.servers.push(s);
    return s;
  }

  close() {
    for (const s of this.servers) s.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

// Server is one voicesvc process and its store.
export class Server {
  constructor(db) {
    this.db = db;
  }

  // admin runs `voicesvc admin COMMAND... --db DB FLAGS...` on the server's
  // store (its leading words up to the first flag are the command) and
  // parses the JSON it prints.
  async admin(...args) {
    let i = args.findIndex((a) => a.startsWith('-'));
    if (i < 0) i = args.length;
    const { stdout } = await run(BIN, ['admin', ...args.slice(0, i), '--db', this.db, ...args.slice(i)]);
    return JSON.parse(stdout);
  }

  // start serves with the espeak engine on a free loopback port (extra
  // flags add to or override that) and resolves with this once the
  // `voicesvc listening on URL` line names the address: base is that URL,
  // api the public API's root under it.
  start(...extra) {
    return new Promise((resolve, reject) => {
      const child = spawn(BIN, ['serve', '--addr', '127.0.0.1:0', '--db', this.db, '--engine', 'espeak', ...extra],
        { stdio: ['ignore', 'ignore', 'pipe'] });
      this.child = child;
      let buf = '';
      const timer = setTimeout(() => reject(new Error('server did not start: ' + buf)), 60_000);
      child.on('exit', (code) => reject(new Error(`server exited ${code}: ${buf}`)));
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (d) => {
        if (this.base) return; // keep draining the pipe
        buf += d;
        const m = buf.match(/voicesvc listening on (https?:\/\/\S+)/);
        if (m) {
          clearTimeout(timer);
          this.base = m[1];
          this.api = m[1] + ROOT;
          resolve(this);
        }
      });
    });
  }

  stop() {
    if (this.child && this.child.exitCode === null) this.child.kill('SIGTERM');
  }

  // workspace makes a workspace of plan (update: flags of `workspace
  // update`) and resolves with its id and a key of it.
  async workspace(plan, name, ...update) {
    const ws = await this.admin('workspace', 'create', '--name', name, '--plan', plan);
    if (update.length) await this.admin('workspace', 'update', '--id', ws.id, ...update);
    return { id: ws.id, key: (await this.admin('key', 'create', '--workspace', ws.id)).key };
  }

  // englishVoices lists the English catalog voices that have an alias, in
  // the server's order.
  async englishVoices(key) {
    const res = await fetch(this.api + '/voices?page_size=100', { headers: { 'X-API-Key': key } });
    assert.equal(res.status, 200);
    return (await res.json()).data.voices.filter((v) => v.alias && v.primary_language === 'en');
  }
}

// makeCert writes a self-signed P-256 certificate for the subjectAltName
// san (e.g. 'IP:127.0.0.1,DNS:localhost'), valid for a day, into dir and
// resolves with the paths of it and its key.
export async function makeCert(dir, san) {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=voicesvc test', '-addext', 'subjectAltName=' + san]);
  return { cert, key };
}
