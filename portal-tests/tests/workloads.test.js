// Platform workloads in a real browser against a real control plane (SPEC 5): the upload page
// of a function warns that a DisallowLatestTag policy will deny the build of uploaded code
// (the function builder is tagged latest), the create shows the same warning, and the
// boundary page then shows the status the reconciler recorded when the cluster refused the
// build Job.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  boundaryOnPlane, newPage, poll, putEnforcedPolicy, screenshot, startAll, stopAll,
} from './harness.js';

const WARNING =
  "Policy 'no-latest' (DisallowLatestTag) denies builds of uploaded code: the function builder is referenced by the tag latest";
const BUILD_REJECTED =
  "build rejected: Policy 'no-latest' (DisallowLatestTag) denied image ghcr.io/palisade-dev/function-builder:latest: it is tagged latest or carries no tag.";

let server;
let browser;
let plane;

before(async () => ({ plane, server, browser } = await startAll({ plane: '1.37', reconciler: true, publicUrl: true })));
after(() => stopAll({ plane, server, browser }));

describe('workloads', () => {
  test('an uploaded function: warned before, warned after, and its build rejected', async () => {
    await boundaryOnPlane(server, plane, 'web-team');
    // The build Job must meet the policy in force, as it would after any real rollout.
    const installed = await putEnforcedPolicy(
      server, 'web-team', 'no-latest', { rules: [{ disallowLatestTag: {} }] },
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

    const stored = await server.ok('GET', '/v1/boundaries/web-team/resources/function/hook');
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
