// The policy editor's preview and the policy page's audit, in a real browser against a real
// control plane: a Deployment runs nginx:latest; the preview of a policy that forbids it shows
// the Deployment, its replicas and the exact message before anything is saved; a save asks for
// confirmation naming the replicas at risk; once saved, the policy page shows the audit.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { boundaryOnPlane, newPage, screenshot, startAll, stopAll } from './harness.js';

const MESSAGE =
  "Policy 'no-latest' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag.";

let server;
let browser;
let plane;

before(async () => ({ plane, server, browser } = await startAll({ plane: '1.37', reconciler: true })));
after(() => stopAll({ plane, server, browser }));

describe('preview and audit', () => {
  test('previews, asks to confirm the replicas at risk, saves, and shows the audit', async () => {
    await boundaryOnPlane(server, plane, 'web-team');
    const created = await plane.create('/apis/apps/v1/namespaces/web/deployments', {
      apiVersion: 'apps/v1', kind: 'Deployment',
      metadata: { name: 'web', labels: { app: 'web' } },
      spec: {
        replicas: 2, selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'web', image: 'nginx:latest' }] } },
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));

    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/web-team/policies/new`);
    await page.getByLabel('Policy name').fill('no-latest');
    await page.getByLabel(/Deny images tagged latest/).check();
    await page.getByRole('button', { name: 'Preview', exact: true }).click();
    const summary = page.locator('#preview-summary');
    await summary.waitFor();
    assert.match(await summary.innerText(), /Would deny 1 objects of 1 workloads, 2 replicas at risk/);
    // The result is where the user looks: the answer's URL ends in #preview, and the browser
    // scrolled the result's heading into the window.
    assert.match(page.url(), /#preview$/);
    const top = await page.locator('#preview-heading').evaluate((h) => h.getBoundingClientRect().top);
    assert.ok(top >= 0 && top < 900, `the preview's heading is at ${top} px`);
    const row = page.locator('#preview-denied tbody tr');
    assert.equal(await row.count(), 1);
    const cells = await row.locator('td').allInnerTexts();
    assert.deepEqual(cells, ['local', 'web', 'Deployment/web', 'Deployment/web', '2', MESSAGE]);
    assert.equal((await server.api('GET', '/v1/boundaries/web-team/policies/no-latest')).status, 404);
    await screenshot(page, 'policy-preview');

    // Saving asks first, naming the replicas at risk; nothing is saved until confirmed.
    await page.locator('#policy-form button.primary').click();
    const notice = page.locator('#confirm-notice');
    await notice.waitFor();
    assert.match(await notice.innerText(), /this policy would newly deny 1 objects of 1 workloads, 2 replicas at risk/);
    assert.equal((await server.api('GET', '/v1/boundaries/web-team/policies/no-latest')).status, 404);
    const confirm = page.locator('#save-anyway');
    assert.equal(await confirm.innerText(), 'Save anyway (2 replicas at risk)');
    await screenshot(page, 'policy-confirm');
    await confirm.click();
    await page.locator('#save-warnings, .notice.success').first().waitFor();
    assert.equal((await server.api('GET', '/v1/boundaries/web-team/policies/no-latest')).status, 200);

    // The policy page shows the audit once it has run.
    const deadline = Date.now() + 60_000;
    let audited = '';
    while (Date.now() < deadline) {
      await page.goto(`${server.url}/boundaries/web-team/policies/no-latest/edit`);
      audited = await page.locator('#audit-clusters tbody tr').first().innerText();
      if (/^local\s+1\s+1\s+\d{4}-/.test(audited) && !/under way/.test(audited)) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.match(audited, /^local\s+1\s+1\s+\d{4}-/);
    const finding = await page.locator('#audit-findings tbody tr').first().locator('td').allInnerTexts();
    assert.deepEqual(finding, ['local', 'web', 'Deployment/web', 'Deployment/web', '2', MESSAGE]);
    await screenshot(page, 'policy-audit');
    await page.context().close();
  });
});
