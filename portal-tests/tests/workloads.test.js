// Platform workloads in a real browser against a real control plane (SPEC 5): the upload page
// of a function warns that a DisallowLatestTag policy will deny the build of uploaded code
// (the function builder is tagged latest), the create shows the same warning, and the
// boundary page then shows the status the reconciler recorded when the cluster refused the
// build Job.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { newPage, screenshot, startBrowser, startControlPlane, startServer } from './harness.js';

const WARNING =
  "Policy 'no-latest' (DisallowLatestTag) denies builds of uploaded code: the function builder is referenced by the tag latest";
const BUILD_REJECTED =
  "build rejected: Policy 'no-latest' (DisallowLatestTag) denied image ghcr.io/palisade-dev/function-builder:latest: it is tagged latest or carries no tag.";

let server;
let browser;
let plane;

before(async () => {
  plane = await startControlPlane('1.37');
  server = await startServer({ reconciler: true, publicUrl: true });
  browser = await startBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  plane?.stop();
});

async function ok(method, apiPath, body) {
  const answer = await server.api(method, apiPath, body);
  assert.ok(answer.status < 300, `${method} ${apiPath}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

/** Polls `read` every 250 ms until `done(value)` or the deadline; answers the last value. */
async function poll(read, done, seconds) {
  const deadline = Date.now() + seconds * 1000;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    value = await read();
  }
  return value;
}

describe('workloads', () => {
  test('an uploaded function: warned before, warned after, and its build rejected', async () => {
    await ok('POST', '/v1/boundaries', { name: 'web-team' });
    await ok('PUT', '/v1/clusters/local', { kubeconfig: plane.kubeconfig });
    await ok('PUT', '/v1/boundaries/web-team/clusters/local');
    await ok('PUT', '/v1/boundaries/web-team/clusters/local/namespaces/web');
    await ok('PUT', '/v1/boundaries/web-team/policies/no-latest', { rules: [{ disallowLatestTag: {} }] });
    // The build Job must meet the policy in force, as it would after any real rollout.
    const installed = await poll(
      async () => (await ok('GET', '/v1/boundaries/web-team/policies/no-latest')).status.clusters,
      (clusters) => clusters.some((c) => c.cluster === 'local' && c.status === 'enforced'),
      60,
    );
    assert.deepEqual(installed.map((c) => [c.cluster, c.status]), [['local', 'enforced']]);

    const page = await newPage(browser, server);
    // The boundary page links to the upload pages.
    await page.goto(`${server.url}/boundaries/web-team`);
    await page.getByRole('link', { name: 'Function from uploaded code' }).click();
    await page.waitForURL(`${server.url}/boundaries/web-team/uploads/new?type=function`);
    const notice = page.locator('#upload-warnings');
    await notice.waitFor();
    assert.deepEqual(await notice.locator('li').allInnerTexts(), [WARNING]);
    await screenshot(page, 'upload-form');

    await page.getByLabel('Name', { exact: true }).fill('hook');
    await page.locator('#plan-small').check();
    await page.setInputFiles('#file', {
      name: 'hook.js',
      mimeType: 'text/javascript',
      buffer: Buffer.from("export default async () => new Response('hi');\n"),
    });
    await page.locator('#upload-form button.primary').click();
    const created = page.locator('#created');
    await created.waitFor();
    assert.equal(await created.innerText(), 'Created function hook.');
    assert.deepEqual(await page.locator('#warnings li').allInnerTexts(), [WARNING]);
    await screenshot(page, 'upload-created');

    const stored = await ok('GET', '/v1/boundaries/web-team/resources/function/hook');
    assert.match(stored.upload, /^u-[0-9a-f]{20}$/);
    assert.equal(stored.cluster, 'local');
    assert.equal(stored.namespace, 'web');

    // The reconciler creates the build Job; the cluster refuses it; the page says so.
    const status = await poll(
      async () => {
        await page.goto(`${server.url}/boundaries/web-team`);
        return page.locator('tr[data-resource="function/hook"] td.resource-status').innerText();
      },
      (text) => text === BUILD_REJECTED,
      60,
    );
    assert.equal(status, BUILD_REJECTED);
    assert.equal(
      await page.locator('tr[data-resource="function/hook"] td.resource-status > span').getAttribute('class'),
      'status bad',
    );
    await screenshot(page, 'workload-status');
    await page.context().close();
  });
});
