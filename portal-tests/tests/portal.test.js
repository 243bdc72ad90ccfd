// The portal in a real browser: sign-in, the boundary page with cluster status, the policy
// editor, the plan pickers (disabled plans with their reason, the API's 422 after a crafted
// submission, the function picker the API does not enforce), a reload after a create or a
// save (it submits nothing), roles, and Swedish.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { newPage, screenshot, startAll, stopAll } from './harness.js';

const DENIED_LARGE =
  "Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium.";

let server;
let browser;

before(async () => ({ server, browser } = await startAll()));
after(() => stopAll({ server, browser }));

/** Removes `disabled` from a plan option, as a crafted request would bypass it. */
async function enable(page, selector) {
  await page.evaluate((s) => document.querySelector(s).removeAttribute('disabled'), selector);
}

describe('portal', () => {
  test('signs in with the keyboard alone and lists the boundaries', async () => {
    const page = await newPage(browser, server, null);
    await page.goto(`${server.url}/`);
    assert.match(page.url(), /\/sign-in\?next=%2F$/);
    assert.equal(await page.getAttribute('html', 'lang'), 'en');
    // Tab to the token field, type, and press Enter: no mouse.
    for (let i = 0; i < 15; i += 1) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate(() => document.activeElement?.id)) === 'token') break;
    }
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'token');
    await page.keyboard.type(server.admin);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${server.url}/`);
    await page.getByRole('link', { name: 'shop' }).waitFor();
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'palisade_session');
    assert.ok(session, 'a session cookie is set');
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Strict');
    await page.context().close();
  });

  test('shows a cluster marked not enforced with its reason', async () => {
    // The seeder records statuses with the reconciler's own functions
    // (crates/portal/tests/common/reconciled.rs); these are the texts it writes.
    const old = 'not enforced: Kubernetes 1.29 is older than 1.30';
    const noApi =
      'not enforced: the API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy';
    const refused = 'cannot reach the API server: connection refused';
    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/shop`);
    const legacy = page.locator('#clusters tr[data-cluster="legacy-1"]');
    assert.equal((await legacy.locator('td').nth(1).innerText()).trim(), old);
    assert.match(await legacy.innerText(), /v1\.29\.4/);
    const noapi = page.locator('#clusters tr[data-cluster="noapi-1"]');
    assert.equal((await noapi.locator('td').nth(1).innerText()).trim(), noApi);
    assert.match(await page.locator('#clusters tr[data-cluster="prod-1"]').innerText(), /enforced/);
    const edge = page.locator('#clusters tr[data-cluster="edge-1"]');
    assert.match(await edge.innerText(), /not checked yet/);
    assert.match(await edge.innerText(), new RegExp(`Last attempt failed: ${refused}`));
    // Each policy lists its clusters with the recorded status, shown exactly once.
    const expected = {
      trusted: {
        'prod-1': 'enforced',
        'staging-1': 'installed',
        'legacy-1': old,
        'noapi-1': noApi,
        'edge-1': `error: ${refused}`,
      },
      'owner-label': {
        'prod-1': 'pending',
        'staging-1': 'installed',
        'legacy-1': old,
        'noapi-1': noApi,
        'edge-1': `error: ${refused}`,
      },
    };
    for (const [policy, clusters] of Object.entries(expected)) {
      const section = page.locator(`#policy-${policy}`);
      for (const [cluster, status] of Object.entries(clusters)) {
        const line = (await section.locator(`li[data-install="${cluster}"]`).innerText()).trim();
        assert.equal(line, `${cluster}: ${status}`, `${policy} in ${cluster}`);
        assert.equal(line.split(status).length - 1, 1, `shown once: ${line}`);
      }
    }
    // Grandfathered: the demo's app on 'large' and the policy that now disallows it.
    const grandfathered = page.locator('#grandfathered');
    assert.match(await grandfathered.innerText(), /legacy-reports\s+large\s+size-limits/);
    await screenshot(page, 'boundary-page');
    await page.context().close();
  });

  test('creates a policy in the editor, with the save error next to its field', async () => {
    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/shop`);
    await page.getByRole('link', { name: 'New policy' }).click();
    await page.getByLabel('Policy name').fill('registries');
    await page.getByLabel(/Registry prefixes/).fill('ghcr.io/acme\nnot a registry');
    await page.getByLabel(/Deny images tagged latest/).check();
    await page.locator('#policy-form button.primary').click();
    // The API's 400 names /rules/0/allowedRegistries/registries/1: shown at the registries field.
    const fieldError = page.locator('#error-registries');
    await fieldError.waitFor();
    assert.match(await fieldError.innerText(), /^Line 2: \/rules\/0\/allowedRegistries\/registries\/1: /);
    assert.equal(await page.getAttribute('#registries', 'aria-describedby'), 'error-registries');
    await screenshot(page, 'policy-editor-error');
    await page.getByLabel(/Registry prefixes/).fill('ghcr.io/acme\ndocker.io/library/');
    await page.locator('#policy-form button.primary').click();
    const warnings = page.locator('#save-warnings');
    await warnings.waitFor();
    assert.match(await warnings.innerText(), /registry prefix 'docker\.io\/library\/' saved as 'docker\.io\/library'/);
    // The YAML view shows the same document.
    const yaml = await page.locator('#yaml').inputValue();
    assert.match(yaml, /kind: BoundaryPolicy/);
    assert.match(yaml, /- docker\.io\/library\n/);
    await screenshot(page, 'policy-editor-saved');
    const stored = await server.api('GET', '/v1/boundaries/shop/policies/registries');
    assert.equal(stored.status, 200);
    assert.deepEqual(stored.body.spec.rules, [
      { allowedRegistries: { registries: ['ghcr.io/acme', 'docker.io/library'] } },
      { disallowLatestTag: {} },
    ]);
    await page.context().close();
  });

  test('saves from the YAML view and deletes after confirmation', async () => {
    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/shop/policies/new`);
    await page.getByLabel('Policy name').fill('watch');
    await page.getByLabel(/Plans \(one per line/).fill('small');
    await page.getByLabel('audit').check();
    await page.locator('#policy-form button.primary').click();
    await page.locator('#save-warnings, .notice.success').first().waitFor();
    const yaml = (await page.locator('#yaml').inputValue()).replace(/(\n\s*)- small/, '$1- small$1- medium');
    await page.locator('#yaml').fill(yaml);
    await page.getByRole('button', { name: 'Save YAML' }).click();
    await page.locator('.notice.success').waitFor();
    const stored = await server.api('GET', '/v1/boundaries/shop/policies/watch');
    assert.deepEqual(stored.body.spec.rules, [{ allowedComputePlans: { plans: ['small', 'medium'] } }]);
    assert.equal(stored.body.spec.mode, 'audit');
    await page.getByRole('link', { name: 'Delete…' }).click();
    assert.match(await page.locator('h1').innerText(), /Delete policy 'watch'/);
    assert.equal((await server.api('GET', '/v1/boundaries/shop/policies/watch')).status, 200, 'not deleted before confirming');
    await page.getByRole('button', { name: 'Delete the policy' }).click();
    await page.waitForURL(/\/boundaries\/shop\?deleted=watch$/);
    assert.equal((await server.api('GET', '/v1/boundaries/shop/policies/watch')).status, 404);
    await page.context().close();
  });

  test('disables a disallowed plan with its reason, and shows the 422 of a crafted submission', async () => {
    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/shop/resources/new?type=app`);
    const large = page.locator('#plan-large');
    assert.equal(await large.isDisabled(), true);
    assert.equal((await page.locator('#reason-large').innerText()).trim(), "Disallowed by boundary policy 'size-limits'");
    assert.equal(await page.locator('#plan-small').isDisabled(), false);
    assert.equal(await page.locator('#plan-small').isChecked(), true);
    await screenshot(page, 'plan-picker');
    // Bypass the disabled option, as a crafted request would.
    await enable(page, '#plan-large');
    await large.check();
    await page.getByLabel('Name', { exact: true }).fill('reports');
    await page.getByLabel('Image', { exact: true }).fill('ghcr.io/acme/reports:1.0');
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.locator('#resource-form button.primary').click(),
    ]);
    assert.equal(answer.status(), 422);
    await page.locator('#api-error').waitFor();
    assert.equal(await page.locator('#api-error .api-message').innerText(), DENIED_LARGE);
    assert.match(await page.locator('#api-error').innerText(), /compute_plan_not_allowed/);
    await screenshot(page, 'plan-denied');
    assert.equal((await server.api('GET', '/v1/boundaries/shop/resources/app/reports')).status, 404);
    await page.context().close();
  });

  test('greys out a function plan the API does not enforce, and creates the function', async () => {
    const picker = await server.api('GET', '/v1/boundaries/shop/plans?type=function');
    assert.equal(picker.body.enforced, false);
    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/shop/resources/new?type=function`);
    assert.equal(await page.locator('#plan-large').isDisabled(), true);
    assert.match(await page.locator('#reason-large').innerText(), /Disallowed by boundary policy 'size-limits'/);
    assert.match(await page.locator('#not-enforced').innerText(), /does not enforce plans of functions/);
    await screenshot(page, 'function-picker');
    await enable(page, '#plan-large');
    await page.locator('#plan-large').check();
    await page.getByLabel('Name', { exact: true }).fill('resize');
    await page.getByLabel('Source (git URL)').fill('https://git.example.com/acme/resize.git');
    await page.locator('#resource-form button.primary').click();
    await page.locator('#created').waitFor();
    assert.match(
      await page.locator('#warnings').innerText(),
      /Compute plan 'large' is disallowed by boundary policy 'size-limits'; plans of functions are not enforced/,
    );
    const created = await server.api('GET', '/v1/boundaries/shop/resources/function/resize');
    assert.equal(created.status, 200);
    assert.equal(created.body.plan, 'large');
    await page.context().close();
  });

  test('creates a container instance from component rows', async () => {
    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/shop/resources/new?type=container_instance`);
    assert.match(await page.locator('#component-plan-0 option[value="large"]').innerText(), /Disallowed by boundary policy 'size-limits'/);
    assert.equal(await page.locator('#component-plan-0 option[value="large"]').isDisabled(), true);
    await page.getByLabel('Name', { exact: true }).fill('jobs');
    await page.getByLabel('Component name 1').fill('worker');
    await page.getByLabel('Plan of component 1').selectOption('small');
    await page.getByLabel('Image of component 1').fill('ghcr.io/acme/worker:3');
    await page.getByRole('button', { name: 'Add a component row' }).click();
    await page.getByLabel('Component name 2').fill('proxy');
    await page.getByLabel('Plan of component 2').selectOption('medium');
    await page.getByLabel('Image of component 2').fill('ghcr.io/acme/proxy:1');
    await page.locator('#resource-form button.primary').click();
    await page.locator('#created').waitFor();
    const created = await server.api('GET', '/v1/boundaries/shop/resources/container_instance/jobs');
    assert.deepEqual(created.body.components.map((c) => [c.name, c.plan]), [['worker', 'small'], ['proxy', 'medium']]);
    await page.context().close();
  });

  test('a reload after Create and after Save shows the result again and submits nothing', async () => {
    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/shop/resources/new?type=valkey`);
    await page.getByLabel('Name', { exact: true }).fill('sessions');
    const [posted] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.locator('#resource-form button.primary').click(),
    ]);
    assert.equal(posted.status(), 303);
    await page.waitForURL(`${server.url}/boundaries/shop/resources/valkey/sessions`);
    assert.equal(await page.locator('#created').innerText(), 'Created valkey sessions.');
    await screenshot(page, 'resource-created');
    const navigations = [];
    page.on('request', (r) => {
      if (r.isNavigationRequest()) navigations.push(`${r.method()} ${new URL(r.url()).pathname}`);
    });
    const reloaded = await page.reload();
    assert.equal(reloaded.status(), 200);
    assert.deepEqual(navigations, ['GET /boundaries/shop/resources/valkey/sessions']);
    assert.equal(await page.locator('#created').count(), 0, 'the notice is shown once');
    assert.match(await page.locator('#resource').innerText(), /sessions/);
    const list = await server.api('GET', '/v1/boundaries/shop/resources?type=valkey');
    assert.deepEqual(list.body.items.filter((r) => r.name === 'sessions').length, 1, 'created once');

    // The same after a policy save: the reload reads the policy, it does not save it again.
    await page.goto(`${server.url}/boundaries/shop/policies/size-limits/edit`);
    await page.getByLabel(/Plans \(one per line/).fill('small, medium, valkey/small, large');
    await page.locator('#policy-form button.primary').click();
    await page.waitForURL(`${server.url}/boundaries/shop/policies/size-limits/edit`);
    await page.locator('.notice.success').waitFor();
    const history = async () =>
      (await server.api('GET', '/v1/boundaries/shop/policies/size-limits/history')).body.items.length;
    const saves = await history();
    navigations.length = 0;
    await page.reload();
    assert.deepEqual(navigations, ['GET /boundaries/shop/policies/size-limits/edit']);
    assert.equal(await page.locator('.notice.success').count(), 0, 'the notice is shown once');
    assert.equal(await history(), saves, 'saved once');
    // Put the demo's plans back for the tests that follow.
    await page.getByLabel(/Plans \(one per line/).fill('small, medium, valkey/small');
    await page.locator('#policy-form button.primary').click();
    await page.locator('.notice.success').waitFor();
    await page.context().close();
  });

  test('edits a grandfathered resource: its plan is kept, a move is checked', async () => {
    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/shop`);
    await page.locator('#grandfathered').getByRole('link', { name: 'legacy-reports' }).click();
    assert.equal(await page.locator('#plan-large').isChecked(), true, 'the current plan stays selectable');
    assert.equal(await page.locator('#plan-xlarge').isDisabled(), true);
    assert.match(await page.locator('#reason-large').innerText(), /keeping it is allowed/);
    await page.getByLabel('Image', { exact: true }).fill('ghcr.io/acme/reports:1.1');
    await page.locator('#resource-form button.primary').click();
    await page.locator('#created').waitFor();
    let stored = await server.api('GET', '/v1/boundaries/shop/resources/app/legacy-reports');
    assert.equal(stored.body.plan, 'large');
    assert.equal(stored.body.image, 'ghcr.io/acme/reports:1.1');
    await page.getByRole('link', { name: 'Edit' }).click();
    await page.locator('#plan-medium').check();
    await page.locator('#resource-form button.primary').click();
    await page.locator('#created').waitFor();
    stored = await server.api('GET', '/v1/boundaries/shop/resources/app/legacy-reports');
    assert.equal(stored.body.plan, 'medium');
    await page.context().close();
  });

  test('a developer sees its boundary only and cannot edit policies', async () => {
    const other = await server.api('POST', '/v1/boundaries', { name: 'other' });
    assert.equal(other.status, 201);
    const token = await server.api('POST', '/v1/tokens', { role: 'developer', boundary: 'shop' });
    assert.equal(token.status, 201);
    const page = await newPage(browser, server, token.body.secret);
    assert.deepEqual(await page.locator('main table a').allInnerTexts(), ['shop']);
    await page.goto(`${server.url}/boundaries/shop`);
    assert.equal(await page.getByRole('link', { name: 'New policy' }).count(), 0);
    assert.equal(await page.locator('#clusters').count(), 0);
    assert.equal(await page.getByRole('link', { name: 'Edit' }).count(), 0);
    const edit = await page.goto(`${server.url}/boundaries/shop/policies/size-limits/edit`);
    assert.equal(edit.status(), 403);
    assert.match(await page.locator('main').innerText(), /the token is a developer token/);
    const hidden = await page.goto(`${server.url}/boundaries/other`);
    assert.equal(hidden.status(), 404);
    await page.context().close();
  });

  test('a developer requests an exception and a boundary-admin approves it', async () => {
    const asked = await server.api('POST', '/v1/tokens', { role: 'developer', boundary: 'shop' });
    const approver = await server.api('POST', '/v1/tokens', { role: 'boundary-admin', boundary: 'shop' });
    const page = await newPage(browser, server, asked.body.secret);
    await page.goto(`${server.url}/boundaries/shop`);
    await page.getByRole('link', { name: 'Request an exception' }).click();
    await page.getByLabel('Exception name').fill('legacy-reports-plan');
    await page.getByLabel('Policy').selectOption('size-limits');
    await page.getByLabel('AllowedComputePlans').check();
    await page.getByLabel('Resources', { exact: true }).fill('app/reports');
    await page.getByLabel('Plans', { exact: true }).fill('large');
    await page.getByLabel('Reason').fill('moving to medium, OPS-1234');
    await page.getByRole('button', { name: 'Request the exception' }).click();
    await page.waitForURL(`${server.url}/boundaries/shop`);
    assert.match(
      await page.locator('.notice.success').innerText(),
      /Requested exception 'legacy-reports-plan'/,
    );
    assert.equal(await page.getByRole('button', { name: 'Approve legacy-reports-plan' }).count(), 0);
    await screenshot(page, 'exception-requested');
    await page.context().close();

    const admin = await newPage(browser, server, approver.body.secret);
    await admin.goto(`${server.url}/boundaries/shop`);
    await admin.getByRole('button', { name: 'Approve legacy-reports-plan' }).click();
    await admin.waitForURL(`${server.url}/boundaries/shop`);
    assert.match(
      await admin.locator('.notice.success').innerText(),
      /Approved exception 'legacy-reports-plan': active until /,
    );
    const stored = await server.api('GET', '/v1/boundaries/shop/exceptions/legacy-reports-plan');
    assert.equal(stored.body.status, 'active');
    await admin.context().close();
  });

  test('switches to Swedish and back', async () => {
    const page = await newPage(browser, server);
    await page.goto(`${server.url}/boundaries/shop/resources/new?type=app`);
    await page.getByRole('link', { name: 'Svenska' }).click();
    await page.waitForURL(/\/boundaries\/shop\/resources\/new\?type=app$/);
    assert.equal(await page.getAttribute('html', 'lang'), 'sv');
    await page.getByRole('button', { name: 'Logga ut' }).waitFor();
    assert.equal(await page.locator('#plan-picker legend').innerText(), 'Plan');
    assert.equal(await page.getByRole('button', { name: 'Skapa' }).count(), 1);
    // The portal's own words are Swedish, the picker's reason too (SPEC 2.5); names as named.
    assert.equal(
      (await page.locator('#reason-large').innerText()).trim(),
      "Otillåten enligt boundary-policyn 'size-limits'",
    );
    await screenshot(page, 'swedish-picker');
    await page.goto(`${server.url}/boundaries/shop`);
    assert.equal(await page.locator('#clusters-heading').innerText(), 'Kluster');
    await page.getByRole('link', { name: 'English' }).click();
    assert.equal(await page.getAttribute('html', 'lang'), 'en');
    assert.equal(await page.locator('#clusters-heading').innerText(), 'Clusters');
    await page.context().close();
  });

  test('signs out', async () => {
    const page = await newPage(browser, server);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/sign-in$/);
    await page.goto(`${server.url}/boundaries/shop`);
    assert.match(page.url(), /\/sign-in\?next=%2Fboundaries%2Fshop$/);
    await page.context().close();
  });
});
