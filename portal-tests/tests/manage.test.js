// The README's cluster walkthrough done in the portal, against a real control plane: create a
// boundary, register a cluster from its kubeconfig, attach it, create a namespace (labelled in
// the cluster), create a developer token whose secret is shown once and works on the API, and
// revoke it. Every POST redirects; a refused one shows the API's code and message with its
// status. Each page has no axe violations, in English and Swedish.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { axeViolations, newPage, screenshot, startAll, stopAll } from './harness.js';

let server;
let browser;
let plane;

before(async () => ({ plane, server, browser } = await startAll({ plane: '1.37', reconciler: true })));
after(() => stopAll({ plane, server, browser }));

/** Submits a form by its button and answers the POST's status and the URL it ends on. */
async function submit(page, button) {
  const [posted] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST'),
    button.click(),
  ]);
  await page.waitForLoadState();
  return posted.status();
}

describe('management pages', () => {
  test('the cluster walkthrough: boundary, cluster, attach, namespace, token', async () => {
    const page = await newPage(browser, server);

    // A boundary, from the boundaries list.
    await page.goto(`${server.url}/`);
    await page.getByLabel('Name', { exact: true }).fill('walk');
    await page.getByLabel(/Display name/).fill('Walkthrough');
    assert.equal(await submit(page, page.getByRole('button', { name: 'Create the boundary' })), 303);
    await page.waitForURL(`${server.url}/boundaries/walk`);
    assert.match(await page.locator('.notice.success').innerText(), /Created boundary walk/);
    assert.deepEqual(await axeViolations(page), []);

    // A cluster from its kubeconfig; a refused one first, with the API's 400.
    await page.getByRole('link', { name: 'Clusters', exact: true }).click();
    await page.waitForURL(`${server.url}/clusters`);
    await page.getByLabel('Name', { exact: true }).fill('local');
    await page.getByLabel('Kubeconfig (YAML)').fill(plane.kubeconfig.replace('https://', 'http://'));
    assert.equal(await submit(page, page.getByRole('button', { name: 'Register the cluster' })), 400);
    assert.match(await page.locator('#refused').innerText(), /^invalid_request \/kubeconfig/);
    assert.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'local', 'the name is kept');
    assert.equal(await page.getByLabel('Kubeconfig (YAML)').inputValue(), '', 'the credentials are not sent back');
    await page.getByLabel('Kubeconfig (YAML)').fill(plane.kubeconfig);
    assert.equal(await submit(page, page.getByRole('button', { name: 'Register the cluster' })), 303);
    await page.waitForURL(`${server.url}/clusters`);
    assert.equal(await page.locator('#done').innerText(), 'Registered cluster local');
    assert.match(await page.locator('#cluster-list tr[data-cluster="local"]').innerText(), /^local/);
    assert.deepEqual(await axeViolations(page), []);
    await screenshot(page, 'clusters-page');

    // Attach it and create a namespace, from the boundary's clusters page.
    await page.goto(`${server.url}/boundaries/walk`);
    await page.getByRole('link', { name: 'Clusters and namespaces' }).click();
    await page.waitForURL(`${server.url}/boundaries/walk/clusters`);
    assert.equal(await page.locator('#no-attached').count(), 1);
    await page.getByLabel('Cluster', { exact: true }).selectOption('local');
    assert.equal(await submit(page, page.getByRole('button', { name: 'Attach', exact: true })), 303);
    assert.equal(await page.locator('#done').innerText(), 'Attached cluster local');
    await page.locator('#namespace-form').getByLabel('Name', { exact: true }).fill('walk-web');
    assert.equal(await submit(page, page.getByRole('button', { name: 'Create or adopt' })), 303);
    assert.equal(await page.locator('#done').innerText(), 'Created namespace walk-web (cluster local)');
    assert.match(await page.locator('section[data-cluster="local"]').innerText(), /walk-web/);
    const namespaces = await server.api('GET', '/v1/boundaries/walk/clusters/local/namespaces/walk-web');
    assert.equal(namespaces.status, 200, JSON.stringify(namespaces.body));
    // The boundary page shows it in its cluster's row.
    await page.goto(`${server.url}/boundaries/walk`);
    assert.match(await page.locator('#clusters tr[data-cluster="local"]').innerText(), /walk-web/);
    await page.goto(`${server.url}/boundaries/walk/clusters`);
    // The same namespace again is no change; another boundary's is refused with the API's 409.
    await page.locator('#namespace-form').getByLabel('Name', { exact: true }).fill('walk-web');
    assert.equal(await submit(page, page.getByRole('button', { name: 'Create or adopt' })), 303);
    assert.match(await page.locator('#done').innerText(), /walk-web/);
    assert.deepEqual(await axeViolations(page), []);
    await screenshot(page, 'boundary-clusters-page');
    // Release it (no workloads there), then it is gone from the page and the API.
    assert.equal(await submit(page, page.getByRole('button', { name: 'Release walk-web' })), 303);
    assert.equal(await page.locator('#done').innerText(), 'Released namespace walk-web (cluster local)');
    assert.equal(
      (await server.api('GET', '/v1/boundaries/walk/clusters/local/namespaces/walk-web')).status,
      404,
    );

    // A developer token: its secret is shown once, and works on the API until revoked.
    await page.getByRole('link', { name: 'Tokens' }).click();
    await page.waitForURL(`${server.url}/tokens`);
    await page.getByLabel('Role').selectOption('developer');
    await page.getByLabel(/^Boundary/).selectOption('walk');
    await page.getByLabel(/Expires in days/).fill('7');
    assert.equal(await submit(page, page.getByRole('button', { name: 'Create the token' })), 303);
    const secret = (await page.locator('#secret').innerText()).trim();
    assert.match(await page.locator('#done').innerText(), /^Created token \S+ \(developer\)$/);
    const id = (await page.locator('#done').innerText()).split(' ')[2];
    assert.equal((await server.api('GET', '/v1/boundaries/walk', undefined, secret)).status, 200);
    assert.equal((await server.api('GET', '/v1/boundaries/shop', undefined, secret)).status, 404);
    assert.deepEqual(await axeViolations(page), []);
    await page.reload();
    assert.equal(await page.locator('#secret').count(), 0, 'the secret is shown once');
    assert.equal(await submit(page, page.getByRole('button', { name: `Revoke ${id}` })), 303);
    assert.equal(await page.locator('#done').innerText(), `Revoked token ${id}`);
    assert.equal((await server.api('GET', '/v1/boundaries/walk', undefined, secret)).status, 401);

    // In Swedish, the same pages.
    await page.goto(`${server.url}/lang/sv`);
    for (const path of ['/', '/clusters', '/boundaries/walk/clusters', '/tokens']) {
      await page.goto(`${server.url}${path}`);
      assert.equal(await page.locator('html').getAttribute('lang'), 'sv');
      assert.deepEqual(await axeViolations(page), [], path);
    }
    await page.context().close();
  });

  test('a developer reaches none of the management pages', async () => {
    const token = (await server.api('POST', '/v1/tokens', { role: 'developer', boundary: 'shop' })).body.secret;
    const page = await newPage(browser, server, token);
    assert.equal(await page.getByRole('link', { name: 'Clusters', exact: true }).count(), 0);
    assert.equal(await page.getByRole('link', { name: 'Tokens' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Create the boundary' }).count(), 0);
    for (const [path, status] of [['/clusters', 403], ['/tokens', 403], ['/boundaries/shop/clusters', 403]]) {
      const answer = await page.goto(`${server.url}${path}`);
      assert.equal(answer.status(), status, path);
    }
    await page.context().close();
  });
});
