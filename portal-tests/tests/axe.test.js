// Every page of the portal, in English and in Swedish, has no axe-core violation of WCAG 2.1 A
// and AA (issue 26): the seeded demo boundary's pages (boundary, clusters and namespaces,
// every resource form, each resource's page, edit and delete pages, each policy's editor and
// delete page, exceptions, uploads), the admin pages, the 404 page and the sign-in page.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { axeViolations, newPage, startAll, stopAll } from './harness.js';

let server;
let browser;

before(async () => ({ server, browser } = await startAll()));
after(() => stopAll({ server, browser }));

const TYPES = ['app', 'container_instance', 'function', 'static_web_app', 'postgresql', 'sqlserver', 'qdrant', 'valkey'];

async function paths() {
  const list = [
    '/', '/clusters', '/tokens', '/boundaries/shop', '/boundaries/shop/clusters',
    '/boundaries/shop/resources/new', '/boundaries/shop/policies/new', '/boundaries/shop/exceptions/new',
    '/boundaries/shop/uploads/new?type=function', '/boundaries/shop/uploads/new?type=static_web_app',
    ...TYPES.map((t) => `/boundaries/shop/resources/new?type=${t}`),
  ];
  const resources = (await server.api('GET', '/v1/boundaries/shop/resources')).body.items;
  for (const r of resources) {
    const base = `/boundaries/shop/resources/${r.type}/${r.name}`;
    list.push(base, `${base}/edit`, `${base}/delete`);
  }
  const policies = (await server.api('GET', '/v1/boundaries/shop/policies')).body.items;
  for (const p of policies) {
    list.push(`/boundaries/shop/policies/${p.name}/edit`, `/boundaries/shop/policies/${p.name}/delete`);
  }
  return list;
}

describe('accessibility', () => {
  test('every page has no axe violation, in English and Swedish', async () => {
    const list = await paths();
    const page = await newPage(browser, server);
    const found = [];
    let checked = 0;
    for (const lang of ['en', 'sv']) {
      await page.goto(`${server.url}/lang/${lang}`);
      for (const path of list) {
        const answer = await page.goto(`${server.url}${path}`);
        assert.equal(answer.status(), 200, `${lang} ${path}`);
        for (const v of await axeViolations(page)) found.push(`${lang} ${path}: ${v}`);
        checked += 1;
      }
      const missing = await page.goto(`${server.url}/nope`);
      assert.equal(missing.status(), 404);
      for (const v of await axeViolations(page)) found.push(`${lang} /nope: ${v}`);
      checked += 1;
    }
    await page.context().close();
    // Signed out: the sign-in page, in both languages.
    const anonymous = await newPage(browser, server, null);
    for (const lang of ['en', 'sv']) {
      await anonymous.goto(`${server.url}/lang/${lang}?next=%2Fsign-in`);
      await anonymous.goto(`${server.url}/sign-in`);
      for (const v of await axeViolations(anonymous)) found.push(`${lang} /sign-in: ${v}`);
      checked += 1;
    }
    await anonymous.context().close();
    console.log(`axe: ${checked} pages checked, ${found.length} violations`);
    assert.deepEqual(found, []);
  });
});
