// A workload's page in a real browser against a real control plane with fake nodes (kwok): the
// user creates an app in the portal and, without touching the page, reads what Kubernetes
// decided (rejected; after a fix deploying and running; degraded after a scale-up a newer
// policy denies, with its pods and the denial event), in
// English and Swedish with no axe violations; then deletes it after a confirmation. The time
// from the click on Create to the verdict on the page is measured and printed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  axeViolations, boundaryOnPlane, newPage, putEnforcedPolicy, screenshot, startAll, stopAll,
} from './harness.js';

const REJECTED =
  "Policy 'no-latest' (DisallowLatestTag) denied image ghcr.io/acme/web:latest: it is tagged latest or carries no tag.";

let server;
let browser;
let plane;

before(async () => ({ plane, server, browser } = await startAll({ plane: '1.37', workloads: true, reconciler: true })));
after(() => stopAll({ plane, server, browser }));

/** Milliseconds from `since` until the API first shows the resource's status matching
 * `pattern` (read every 20 ms, for at most 60 s). */
async function firstSeen(apiPath, pattern, since) {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const answer = await server.api('GET', apiPath);
    if (answer.status === 200 && pattern.test(answer.body.status ?? '')) return Date.now() - since;
    await new Promise((r) => setTimeout(r, 20));
  }
  return NaN;
}

/** Waits until the live region's text matches `pattern`, with no navigation meanwhile. */
async function waitForLive(page, pattern, seconds = 60) {
  await page.waitForFunction(
    (source) => new RegExp(source).test(document.getElementById('live')?.innerText ?? ''),
    pattern.source,
    { timeout: seconds * 1000, polling: 50 },
  );
}

describe('resource page', () => {
  test('follows a workload from create to rejected, then to running, and deletes it', async () => {
    await boundaryOnPlane(server, plane, 'live-team');
    const installed = await putEnforcedPolicy(
      server, 'live-team', 'no-latest', { rules: [{ disallowLatestTag: {} }] }, 100,
    );
    assert.deepEqual(installed.map((c) => [c.cluster, c.status]), [['local', 'enforced']]);

    const page = await newPage(browser, server);
    const navigations = [];
    page.on('request', (r) => {
      if (r.isNavigationRequest()) navigations.push(`${r.method()} ${new URL(r.url()).pathname}`);
    });
    await page.goto(`${server.url}/boundaries/live-team/resources/new?type=app`);
    await page.getByLabel('Name', { exact: true }).fill('web');
    await page.locator('#plan-small').check();
    await page.getByLabel('Image', { exact: true }).fill('ghcr.io/acme/web:latest');
    navigations.length = 0;
    const clicked = Date.now();
    // The API read beside the page, every 20 ms: when the status is there to be read.
    const apiRejected = firstSeen('/v1/boundaries/live-team/resources/app/web', /^rejected/, clicked);
    await page.locator('#resource-form button.primary').click();
    await page.waitForURL(`${server.url}/boundaries/live-team/resources/app/web`);
    await waitForLive(page, /rejected/);
    const rejectedAfter = Date.now() - clicked;
    const rejectedOnApi = await apiRejected;
    // POST, its redirect, and nothing else: the status came without a reload.
    assert.deepEqual(navigations, [
      'POST /boundaries/live-team/resources/new',
      'GET /boundaries/live-team/resources/app/web',
    ]);
    assert.equal(await page.locator('#status').innerText(), `rejected: ${REJECTED}`);
    assert.equal(await page.locator('#status .status').getAttribute('class'), 'status bad');
    assert.equal(await page.locator('#live').getAttribute('data-moving'), 'false');
    assert.match(await page.locator('#workload').innerText(), /none in the cluster/);
    assert.equal(await page.locator('#no-pods').innerText(), 'No pods.');
    assert.deepEqual(await axeViolations(page), []);
    await screenshot(page, 'resource-rejected');

    // Fixed in the edit form: deploying, then running, followed on the page.
    await page.getByRole('link', { name: 'Edit' }).click();
    await page.getByLabel('Image', { exact: true }).fill('ghcr.io/acme/web:1.4');
    navigations.length = 0;
    const fixed = Date.now();
    const apiRunning = firstSeen('/v1/boundaries/live-team/resources/app/web', /^running/, fixed);
    await page.locator('#resource-form button.primary').click();
    await page.waitForURL(`${server.url}/boundaries/live-team/resources/app/web`);
    await waitForLive(page, /running/);
    const runningAfter = Date.now() - fixed;
    const runningOnApi = await apiRunning;
    assert.deepEqual(navigations, [
      'POST /boundaries/live-team/resources/app/web/edit',
      'GET /boundaries/live-team/resources/app/web',
    ]);
    assert.equal(await page.locator('#status').innerText(), 'running');
    assert.equal(await page.locator('#status .status').getAttribute('class'), 'status ok');
    await waitForLive(page, /Running/);
    // The region stops following once running; a reload shows the same replicas and pod.
    await page.reload();
    assert.equal(await page.locator('#replicas').innerText(), '1/1');
    const pods = await page.locator('#pods tbody tr').allInnerTexts();
    assert.equal(pods.length, 1, pods.join('\n'));
    assert.match(pods[0], /^app-web-\S+\s+Running\s+yes\s+0\s+kwok-node-\d/);
    assert.match(await page.locator('#events').innerText(), /ScalingReplicaSet\s+Deployment\/app-web/);
    assert.deepEqual(await axeViolations(page), []);
    await screenshot(page, 'resource-running');

    // A newer policy its image breaks, then a scale-up: the old pod keeps running, the new
    // ones are denied; the page (reached by the save, so followed) turns amber and shows the
    // ReplicaSet's FailedCreate event with the API server's message.
    await putEnforcedPolicy(server, 'live-team', 'registries', {
      rules: [{ allowedRegistries: { registries: ['registry.acme.internal'] } }],
    }, 100);
    await page.getByRole('link', { name: 'Edit' }).click();
    await page.getByLabel('Replicas').fill('2');
    await page.locator('#resource-form button.primary').click();
    await page.waitForURL(`${server.url}/boundaries/live-team/resources/app/web`);
    await waitForLive(page, /degraded/);
    assert.equal(await page.locator('#status .status').getAttribute('class'), 'status warn');
    await waitForLive(page, /FailedCreate/);
    const warning = page.locator('#events tr.event-warning').first();
    assert.match(await warning.innerText(), /Warning\s+FailedCreate\s+ReplicaSet\/app-web-\S+\s+.*Policy 'registries' \(AllowedRegistries\) denied image ghcr.io\/acme\/web:1.4/);
    assert.deepEqual(await axeViolations(page), []);
    await screenshot(page, 'resource-degraded');

    // A page that is following the cluster stops when the session ends (its next read is sent
    // to the sign-in page), instead of asking over and over.
    await page.getByRole('link', { name: 'Edit' }).click();
    await page.locator('#resource-form button.primary').click();
    await page.waitForURL(`${server.url}/boundaries/live-team/resources/app/web`);
    const fetches = [];
    page.on('request', (r) => {
      if (!r.isNavigationRequest()) fetches.push(new URL(r.url()).pathname);
    });
    const cookies = await page.context().cookies();
    await page.context().clearCookies();
    await new Promise((r) => setTimeout(r, 1500));
    // At most: the read in flight (it waits for a change, and was asked while signed in),
    // the next one, and the sign-in page it is sent to; a script that did not stop would ask
    // every 200 ms.
    assert.ok(fetches.length <= 3, `fetches after the session ended: ${fetches.join(', ')}`);
    assert.equal(fetches.at(-1), '/sign-in', fetches.join(', '));
    await page.context().addCookies(cookies);
    await page.reload();

    // In Swedish: palisade's words translated, Kubernetes' own as written.
    await page.goto(`${server.url}/lang/sv`);
    await page.goto(`${server.url}/boundaries/live-team/resources/app/web`);
    assert.match(await page.locator('#status').innerText(), /^försämrad: 1\/2 repliker; poddar nekade: /);
    assert.match(await page.locator('#live h2').innerText(), /I klustret/);
    assert.match(await page.locator('#workload').innerText(), /1\/2 redo \(1 tillgängliga, 1 uppdaterade\)/);
    assert.deepEqual(await axeViolations(page), []);
    await screenshot(page, 'resource-degraded-sv');
    await page.goto(`${server.url}/lang/en`);

    // Delete, after a confirmation that says what stops.
    await page.goto(`${server.url}/boundaries/live-team/resources/app/web`);
    await page.getByRole('link', { name: 'Delete' }).click();
    await page.waitForURL(`${server.url}/boundaries/live-team/resources/app/web/delete`);
    assert.match(await page.locator('#consequence').innerText(), /removes its Deployment, its pods and its build Jobs/);
    assert.deepEqual(await axeViolations(page), []);
    await page.getByRole('button', { name: 'Delete it' }).click();
    await page.waitForURL(`${server.url}/boundaries/live-team`);
    assert.match(await page.locator('.notice.success').first().innerText(), /Deleted app 'web'/);
    assert.equal((await server.api('GET', '/v1/boundaries/live-team/resources/app/web')).status, 404);
    await page.context().close();
    console.log(
      `resource page: Create clicked to 'rejected' on the page ${rejectedAfter} ms (on the API ${rejectedOnApi} ms); ` +
        `Save clicked to 'running' ${runningAfter} ms (on the API ${runningOnApi} ms) ` +
        '(no reload; the region is read again the moment its status moves; the API read every 20 ms)',
    );
  });
});
