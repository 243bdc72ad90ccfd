// Starts `palisade serve --demo` on a pre-seeded store (see crates/portal/examples/browser_seed.rs)
// and Debian's headless Chromium through playwright-core (which downloads no browser).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const root = path.resolve(here, '..', '..');
export const screenshots = path.join(root, 'portal-tests', 'screenshots');

const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
];

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function waitForHealthy(url, child, log) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`palisade serve exited with ${child.exitCode}:\n${log()}`);
    }
    try {
      const answer = await fetch(`${url}/healthz`);
      if (answer.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`palisade serve did not become healthy in 30 s:\n${log()}`);
}

/**
 * A running server on a fresh, seeded data directory, and an admin token. With
 * `{ reconciler: true }` it also runs its reconciler (and audit), as `palisade serve` does;
 * with `{ publicUrl: true }` it says its own URL is where build Jobs fetch uploaded code
 * (`--public-url`), so that uploads are built.
 */
export async function startServer({ reconciler = false, publicUrl = false } = {}) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'palisade-portal-'));
  // Where cargo put them: CARGO_TARGET_DIR when set, as cargo itself reads it.
  const target = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
  const binary = path.join(target, 'debug', 'palisade');
  const seed = path.join(target, 'debug', 'examples', 'browser_seed');
  execFileSync(seed, [dataDir], { stdio: 'pipe' });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let output = '';
  const args = ['serve', '--demo', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir];
  if (!reconciler) args.push('--no-reconciler');
  if (publicUrl) args.push('--public-url', url);
  const child = spawn(binary, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RUST_LOG: 'warn' },
  });
  child.stdout.on('data', (d) => { output += d; });
  child.stderr.on('data', (d) => { output += d; });
  await waitForHealthy(url, child, () => output);
  const admin = fs.readFileSync(path.join(dataDir, 'admin.token'), 'utf8').trim();
  return {
    url,
    admin,
    log: () => output,
    async api(method, apiPath, body, token = admin) {
      const answer = await fetch(`${url}${apiPath}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await answer.text();
      return { status: answer.status, headers: answer.headers, body: text ? JSON.parse(text) : null };
    },
    /** As `api`, as the admin, asserting a 2xx answer; answers its body. */
    async ok(method, apiPath, body) {
      const answer = await this.api(method, apiPath, body);
      assert.ok(answer.status < 300, `${method} ${apiPath}: ${answer.status} ${JSON.stringify(answer.body)}`);
      return answer.body;
    },
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Headless Chromium with a fresh profile (playwright makes a new user data dir per launch). */
export async function startBrowser() {
  if (!fs.existsSync('/usr/bin/chromium')) {
    throw new Error('/usr/bin/chromium is missing: run scripts/ci-chromium.sh');
  }
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
}

/** A new page in a fresh context (no cookies), signed in with `token` unless it is null. */
export async function newPage(browser, server, token = server.admin) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  if (token !== null) {
    await page.goto(`${server.url}/sign-in`);
    await page.getByLabel('Token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${server.url}/`);
  }
  return page;
}

const AXE = fs.readFileSync(path.join(root, 'portal-tests', 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

/**
 * The axe-core violations of the page as it is now (WCAG 2.x A and AA rules), as
 * `rule: target` lines. axe is evaluated through the browser's debugging protocol, which the
 * portal's Content-Security-Policy (scripts from the portal only) does not apply to.
 */
export async function axeViolations(page) {
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const result = await axe.run(document, { runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] });
    return result.violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  });
  return violations;
}

export async function screenshot(page, name) {
  fs.mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: path.join(screenshots, `${name}.png`), fullPage: true });
}

/**
 * A real control plane (testenv/start.sh: etcd and kube-apiserver built from their Go modules,
 * cached), stopped with `stop()`; `create(path, object)` POSTs an object as the cluster's admin.
 */
export async function startControlPlane(version = '1.37', { workloads = false } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'palisade-k8s-'));
  execFileSync('bash', [path.join(root, 'testenv', 'start.sh'), version, dir], {
    stdio: 'pipe',
    env: {
      ...process.env,
      PALISADE_TESTENV_PARENT_PID: String(process.pid),
      // kube-controller-manager, kube-scheduler and kwok's fake nodes: pods become Running.
      ...(workloads ? { START_WORKLOADS: '1' } : {}),
    },
  });
  const env = Object.fromEntries(
    fs.readFileSync(path.join(dir, 'env'), 'utf8').split('\n')
      .map((line) => line.replace(/^export /, '').match(/^([A-Z_]+)=["']?([^"']*)["']?$/))
      .filter(Boolean)
      .map((m) => [m[1], m[2]]),
  );
  const pki = (name) => fs.readFileSync(path.join(dir, 'pki', name));
  const tls = { ca: pki('ca.crt'), cert: pki('admin.crt'), key: pki('admin.key') };
  return {
    kubeconfig: fs.readFileSync(path.join(dir, 'kubeconfig'), 'utf8'),
    create(apiPath, object) {
      const url = new URL(apiPath, env.APISERVER_URL);
      const body = JSON.stringify(object);
      return new Promise((resolve, reject) => {
        const request = https.request(url, {
          method: 'POST', ...tls,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        }, (response) => {
          let text = '';
          response.on('data', (d) => { text += d; });
          response.on('end', () => resolve({ status: response.statusCode, body: JSON.parse(text) }));
        });
        request.on('error', reject);
        request.end(body);
      });
    },
    stop() {
      execFileSync('bash', [path.join(root, 'testenv', 'stop.sh'), dir], { stdio: 'pipe' });
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * What a test file runs against: a control plane when `plane` names its Kubernetes version
 * (with fake nodes when `workloads`), a server started with the other options
 * (`startServer`'s), and a browser. `stopAll` stops what it answers.
 */
export async function startAll({ plane: version, workloads = false, ...serverOptions } = {}) {
  const started = {};
  try {
    if (version) started.plane = await startControlPlane(version, { workloads });
    started.server = await startServer(serverOptions);
    started.browser = await startBrowser();
  } catch (error) {
    await stopAll(started);
    throw error;
  }
  return started;
}

export async function stopAll({ plane, server, browser } = {}) {
  await browser?.close();
  await server?.stop();
  plane?.stop();
}

/** Calls `read` every `every` ms until `done(value)` or `seconds` have passed; answers the last value. */
export async function poll(read, done, seconds, every = 250) {
  const deadline = Date.now() + seconds * 1000;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, every));
    value = await read();
  }
  return value;
}

/** Creates `boundary`, registers the control plane as cluster `local`, attaches it and makes
 * the boundary's namespace `web` there. */
export async function boundaryOnPlane(server, plane, boundary) {
  await server.ok('POST', '/v1/boundaries', { name: boundary });
  await server.ok('PUT', '/v1/clusters/local', { kubeconfig: plane.kubeconfig });
  await server.ok('PUT', `/v1/boundaries/${boundary}/clusters/local`);
  await server.ok('PUT', `/v1/boundaries/${boundary}/clusters/local/namespaces/web`);
}

/** Saves a policy and waits, for 60 s at most, until cluster `local` reports it enforced;
 * answers the policy's statuses per cluster at that moment. */
export async function putEnforcedPolicy(server, boundary, policy, body, every = 250) {
  const policyPath = `/v1/boundaries/${boundary}/policies/${policy}`;
  await server.ok('PUT', policyPath, body);
  return poll(
    async () => (await server.ok('GET', policyPath)).status.clusters,
    (clusters) => clusters.some((c) => c.cluster === 'local' && c.status === 'enforced'),
    60,
    every,
  );
}
