// Runs the Cartesia dialect's official-client tests (cartesia.test.mjs) with
// a certificate made for this run: Cartesia's WebSocket client dials only
// wss:// and LiveKit's plugin posts synthesize() only over https://, so the
// server under test serves TLS (--tls-cert/--tls-key) and Node trusts the
// certificate through NODE_EXTRA_CA_CERTS, which Node reads only at start:
// hence this launcher.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeCert } from '../lib/server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'voicesvc-cartesia-tls-'));
try {
  const { cert, key } = await makeCert(dir, 'IP:127.0.0.1,DNS:localhost');
  const env = { ...process.env, NODE_EXTRA_CA_CERTS: cert, VOICESVC_TLS_CERT: cert, VOICESVC_TLS_KEY: key };
  const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', join(here, 'cartesia.test.mjs')],
    { stdio: 'inherit', env });
  process.exitCode = r.status ?? 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
