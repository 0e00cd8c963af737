// Drives Debian's Chromium through the browser tracker (svc.js) on a test
// page served from another origin than the tracking API, and checks what a
// visitor's browser ends up with: the click cookie, the payment embeds and a
// browser-mode lead, and a click that is not recorded reported as such.
// Plain node, no test runner: exit 0 and one JSON line on stdout on success,
// exit 1 and the reason on stderr otherwise.
//
//   node tracker.spec.mjs --page=URL --api=URL --program-id=N --code-a=A --code-b=B \
//     --window-days=D [--alt-page=URL] [--refused-page=URL] [--code-disabled=C] \
//     [--chromium=/usr/bin/chromium] [--timeout-ms=15000]
//
// Every flag may also come from the environment: SVC_PAGE_URL, SVC_API,
// SVC_PROGRAM_ID, SVC_CODE_A, SVC_CODE_B, SVC_WINDOW_DAYS, SVC_ALT_PAGE_URL,
// SVC_REFUSED_PAGE_URL, SVC_CODE_DISABLED, CHROMIUM_PATH, SVC_TIMEOUT_MS.
//
// --alt-page is the same page under a multi-label host name
// (http://shop.example.test:PORT/...) that Chromium resolves to loopback;
// there the cookie must land on the registrable domain (.example.test).
// --refused-page is the page on an origin the program does not allow
// (http://localhost:PORT/...), so CORS refuses the click. --code-disabled
// names a link that is turned off (410 link_disabled).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parse } from 'acorn';
import { chromium } from 'playwright-core';

const { values: flags } = parseArgs({
  options: {
    page: { type: 'string', default: process.env.SVC_PAGE_URL },
    'alt-page': { type: 'string', default: process.env.SVC_ALT_PAGE_URL || '' },
    'refused-page': { type: 'string', default: process.env.SVC_REFUSED_PAGE_URL || '' },
    'code-disabled': { type: 'string', default: process.env.SVC_CODE_DISABLED || '' },
    api: { type: 'string', default: process.env.SVC_API },
    'program-id': { type: 'string', default: process.env.SVC_PROGRAM_ID },
    'code-a': { type: 'string', default: process.env.SVC_CODE_A },
    'code-b': { type: 'string', default: process.env.SVC_CODE_B },
    'window-days': { type: 'string', default: process.env.SVC_WINDOW_DAYS },
    chromium: { type: 'string', default: process.env.CHROMIUM_PATH || '/usr/bin/chromium' },
    'timeout-ms': { type: 'string', default: process.env.SVC_TIMEOUT_MS || '15000' },
  },
});
for (const k of ['page', 'api', 'program-id', 'code-a', 'code-b', 'window-days']) {
  if (!flags[k]) fail(new Error(`missing --${k}`));
}
const api = flags.api.replace(/\/+$/, '');
const programId = Number(flags['program-id']);
const windowDays = Number(flags['window-days']);
const timeout = Number(flags['timeout-ms']);
const CLICK_ID = /^cust_\d+_\d+$/;
// No link has this code: the click answers 400 `Referral link not found`.
const CODE_UNKNOWN = 'no-such-link';
const NOT_RECORDED = 'the click was not recorded: ';
const NO_REFERRAL = /did not come through a referral link/;

// The flags the brief fixes for Chromium on CI machines: no sandbox (root in
// a container), no GPU, and nothing that phones home during the test.
const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
  '--host-resolver-rules=MAP *.example.test 127.0.0.1',
];

// What the page logged, shown with any failure: a CORS refusal or an
// error thrown by svc.js usually explains a timeout better than the timeout.
const pageErrors = [];
const consoleErrors = [];

function fail(err) {
  process.stderr.write(`tracker.spec: FAIL: ${err && err.stack ? err.stack : err}\n`);
  for (const m of pageErrors) process.stderr.write(`tracker.spec: page error: ${m}\n`);
  for (const m of consoleErrors) process.stderr.write(`tracker.spec: console error: ${m}\n`);
  process.exit(1);
}

// Waits until cond() holds (tab state fed by event listeners).
async function poll(cond, what) {
  const deadline = Date.now() + timeout;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function log(msg) { process.stderr.write(`tracker.spec: ${msg}\n`); }

function isPost(path) {
  return (r) => r.url().split('?')[0] === api + path && r.request().method() === 'POST';
}

// Loads url and returns the tracker's click and visit exchanges. The
// response listeners are set before navigation so nothing is missed.
async function load(page, url, { click }) {
  const clickP = click ? page.waitForResponse(isPost('/api/v1/track/click'), { timeout }) : null;
  const visitP = page.waitForResponse(isPost('/api/v1/track/visit'), { timeout });
  await page.goto(url, { timeout });
  const out = { visit: await visitP };
  if (clickP) {
    const resp = await clickP;
    const body = await resp.json();
    assert.equal(resp.status(), 200, `click answered ${resp.status()}: ${JSON.stringify(body)}`);
    out.click = { request: resp.request().postDataJSON(), body };
  }
  assert.equal(out.visit.status(), 200, `visit answered ${out.visit.status()}: ${await out.visit.text()}`);
  return out;
}

async function cookieOf(context, pageURL) {
  const all = await context.cookies(pageURL);
  const c = all.filter((x) => x.name === 'svc_click_id');
  assert.equal(c.length, 1, `want one svc_click_id cookie for ${pageURL}, got ${JSON.stringify(all)}`);
  return c[0];
}

function checkCookie(cookie, { id, domain }) {
  assert.equal(cookie.value, id, 'cookie holds the click id');
  assert.equal(cookie.sameSite, 'Lax', 'cookie is SameSite=Lax');
  assert.equal(cookie.path, '/', 'cookie path');
  assert.equal(cookie.secure, false, 'no Secure flag on an http page');
  assert.equal(cookie.domain, domain, 'cookie domain');
  const want = Date.now() / 1000 + windowDays * 86400;
  assert.ok(Math.abs(cookie.expires - want) < 600,
    `cookie expires at ${cookie.expires}, want about ${Math.round(want)} (${windowDays} days)`);
}

function checkClickRequest(req, url, existing) {
  assert.equal(req.affiliate_url, url, 'affiliate_url is the landing URL');
  assert.equal(req.page_url, url, 'page_url');
  assert.equal(req.program_id, programId, 'program_id from data-program-id, as a number');
  assert.equal(req.existing_click_id, existing, 'existing_click_id');
  assert.match(req.screen_resolution, /^\d+x\d+$/, 'screen_resolution WxH');
  assert.match(req.viewport_size, /^\d+x\d+$/, 'viewport_size WxH');
  assert.ok(req.user_agent && req.language && req.timezone, `browser fields: ${JSON.stringify(req)}`);
  assert.equal(typeof req.page_title, 'string', 'page_title');
  assert.match(req.session_id, /^[a-z0-9]{8,}$/, 'session_id');
}

// The visit follows the click, so it carries the click id just stored, and
// the tab's session id.
function checkVisitRequest(visit, url, clickId, sessionId) {
  const req = visit.request().postDataJSON();
  assert.equal(req.program_id, programId, 'visit program_id');
  assert.equal(req.page_url, url, 'visit page_url');
  assert.equal(req.click_id, clickId, 'visit click_id');
  assert.equal(req.session_id, sessionId, 'visit session_id is the click\'s');
}

// A tab of its own for clicks that are not recorded: the CORS refusals and
// 4xx answers it provokes stay out of the main tab's console checks.
async function newTab(context) {
  const tab = await context.newPage();
  tab.errors = [];
  tab.consoleErrors = [];
  tab.on('pageerror', (e) => tab.errors.push(String(e)));
  tab.on('console', (m) => { if (m.type() === 'error') tab.consoleErrors.push(m.text()); });
  return tab;
}

// Loads url, whose click is not recorded, and returns the tracker's console
// warning, what svc.lead() then resolves with, and (when the API answered)
// the click response. answered: the API answers the click (4xx) and the
// visit (the origin is allowed); otherwise CORS refuses both.
async function loadUnrecorded(tab, url, { answered }) {
  const warned = tab.waitForEvent('console', {
    predicate: (m) => m.type() === 'warning' && m.text().startsWith('svc: '), timeout,
  });
  const clickP = answered ? tab.waitForResponse(isPost('/api/v1/track/click'), { timeout }) : null;
  const visitP = answered ? tab.waitForResponse(isPost('/api/v1/track/visit'), { timeout }) : null;
  await tab.goto(url, { timeout });
  const out = {
    warning: (await warned.catch(() => { throw new Error(`svc.js printed no "svc: " warning for the unrecorded click on ${url}`); })).text(),
  };
  if (answered) {
    const resp = await clickP;
    out.click = { status: resp.status(), body: await resp.json() };
    const visit = await visitP;
    assert.equal(visit.status(), 200, `visit after a refused click answered ${visit.status()}: ${await visit.text()}`);
  }
  out.lead = await tab.evaluate(() => window.svc.lead({ customer_key: 'cust-unrecorded', email: 'u@b.example' }));
  assert.equal(await tab.evaluate(() => window.svc.clickId()), null, `svc.clickId() after ${url}`);
  return out;
}

// The warning names the cause, and the lead reports the same text, never
// "did not come through a referral link".
function checkUnrecorded(got, { status, reason }) {
  assert.equal(got.warning, 'svc: ' + NOT_RECORDED + reason, 'console warning');
  assert.equal(got.lead.success, false, `lead: ${JSON.stringify(got.lead)}`);
  assert.equal(got.lead.error.status, status, `lead: ${JSON.stringify(got.lead)}`);
  assert.equal(got.lead.error.message, NOT_RECORDED + reason, 'lead reports the unrecorded click');
  assert.doesNotMatch(got.lead.error.message, NO_REFERRAL);
}

// The tracker promises ES5 (older in-app browsers still run brand pages);
// Chromium would accept newer syntax, so parse what the service serves.
async function checkServedTracker() {
  const resp = await fetch(`${api}/svc.js`);
  assert.equal(resp.status, 200, `GET /svc.js answered ${resp.status}`);
  assert.equal(resp.headers.get('content-type'), 'application/javascript; charset=utf-8');
  const src = await resp.text();
  try {
    parse(src, { ecmaVersion: 5, sourceType: 'script' });
  } catch (e) {
    throw new Error(`svc.js is not ES5: ${e.message}`);
  }
  log(`svc.js served, ${src.length} bytes, parses as ES5`);
}

async function main() {
  await checkServedTracker();
  const userDataDir = mkdtempSync(join(tmpdir(), 'svc-chromium-'));
  const started = Date.now();
  let context;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: flags.chromium, headless: true, args: ARGS, timeout: Math.max(timeout, 60000),
    });
    const page = context.pages()[0] || (await context.newPage());
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });

    // 1. Arrival through link A: a new customer, its id in the cookie.
    const urlA = `${flags.page}?via=${encodeURIComponent(flags['code-a'])}`;
    const first = await load(page, urlA, { click: true });
    checkClickRequest(first.click.request, urlA, undefined);
    const id = first.click.body.click_id;
    assert.match(id, CLICK_ID, `click_id ${id}`);
    assert.equal(first.click.body.success, true);
    assert.equal(first.click.body.cookie_window_days, windowDays, 'cookie_window_days is the program window');
    const sessionId = first.click.request.session_id;
    checkVisitRequest(first.visit, urlA, id, sessionId);
    await page.waitForFunction(() => /(^|;\s*)svc_click_id=/.test(document.cookie), null, { timeout, polling: 50 });
    checkCookie(await cookieOf(context, flags.page), { id, domain: new URL(flags.page).hostname });
    assert.equal(await page.evaluate(() => window.svc.clickId()), id, 'svc.clickId()');
    log(`click A recorded: ${id}`);

    // 2. Payment embeds carry the click, including one added after load;
    // a reference the page set itself is kept.
    await page.waitForFunction((want) => document.getElementById('pay').getAttribute('href') === want,
      `https://buy.stripe.com/test_123?client_reference_id=${id}`, { timeout, polling: 50 });
    assert.equal(await page.getAttribute('#own', 'href'),
      'https://buy.stripe.com/test_456?client_reference_id=brand-user-7', 'brand reference kept');
    assert.equal(await page.getAttribute('#pricing', 'client-reference-id'), id, 'pricing table');
    await page.evaluate(() => {
      const b = document.createElement('stripe-buy-button');
      b.id = 'late';
      document.body.appendChild(b);
    });
    await page.waitForFunction((want) => document.getElementById('late').getAttribute('client-reference-id') === want,
      id, { timeout, polling: 50 });
    log('payment link, pricing table and a late buy button carry the click id');

    // 3. Back through link B: the stored id goes along, the customer (and
    // so its first partner) is kept.
    const urlB = `${flags.page}?via=${encodeURIComponent(flags['code-b'])}`;
    const second = await load(page, urlB, { click: true });
    checkClickRequest(second.click.request, urlB, id);
    assert.equal(second.click.body.click_id, id, 'the returning visitor keeps its click id');
    checkVisitRequest(second.visit, urlB, id, sessionId);
    checkCookie(await cookieOf(context, flags.page), { id, domain: new URL(flags.page).hostname });
    log('click B reused the customer');

    // 4. Signup: a browser-mode lead settles on a browser_allowed program;
    // a repeat is refused, and the promise still resolves (never rejects).
    const lead = await page.evaluate(() => window.svc.lead({ customer_key: 'cust-42', email: 'a@b.example' }));
    assert.equal(lead.success, true, `lead: ${JSON.stringify(lead)}`);
    assert.equal(lead.provisional, undefined, 'lead settled, not provisional');
    const again = await page.evaluate(() => window.svc.lead({ customer_key: 'cust-42' }));
    assert.equal(again.success, false, `repeated lead: ${JSON.stringify(again)}`);
    assert.equal(again.error.status, 400, `repeated lead: ${JSON.stringify(again)}`);
    log('lead settled; repeat refused with 400');

    let altId;
    let loads = 2;
    if (flags['alt-page']) {
      // 5. A multi-label host: the cookie goes on the registrable domain.
      // `aff` wins over `via`, and a lead queued before the tracker loaded
      // runs once the click is stored.
      const alt = flags['alt-page'];
      const urlAlt = `${alt}?via=${encodeURIComponent(flags['code-b'])}&aff=${encodeURIComponent(flags['code-a'])}&queue_lead=cust-77`;
      const third = await load(page, urlAlt, { click: true });
      loads++;
      checkClickRequest(third.click.request, urlAlt, undefined);
      altId = third.click.body.click_id;
      assert.match(altId, CLICK_ID);
      assert.notEqual(altId, id, 'another site, another customer');
      assert.notEqual(third.click.request.session_id, sessionId, 'another origin, another session');
      checkVisitRequest(third.visit, urlAlt, altId, third.click.request.session_id);
      await page.waitForFunction(() => window.svcQueuedLead, null, { timeout, polling: 50 });
      const queued = await page.evaluate(() => window.svcQueuedLead);
      assert.equal(queued.err, null, `queued lead: ${JSON.stringify(queued)}`);
      assert.equal(queued.body.success, true, `queued lead: ${JSON.stringify(queued)}`);
      const host = new URL(alt).hostname;
      checkCookie(await cookieOf(context, alt), { id: altId, domain: '.' + host.split('.').slice(-2).join('.') });
      log(`root-domain cookie on ${host}: ${altId}; queued lead settled`);
    }

    if (flags['refused-page']) {
      // 6. A click that is not recorded is reported as such, at once on the
      // console and by a later svc.lead(). Visitors here have no click
      // cookie, so a lead has nothing else to go on.
      await context.clearCookies();
      const tab = await newTab(context);

      // An origin the program does not allow: CORS refuses the preflight,
      // the browser shows a failed request without a response.
      const refused = flags['refused-page'];
      const refusedOrigin = new URL(refused).origin;
      const urlRefused = `${refused}?via=${encodeURIComponent(flags['code-a'])}`;
      const r = await loadUnrecorded(tab, urlRefused, { answered: false });
      checkUnrecorded(r, {
        status: 0,
        reason: `no response from ${api}/api/v1/track/click (network error, timeout or CORS refusal; the browser does not say which). ` +
          `This page's origin ${refusedOrigin} may not be in the program's allowed origins; add it to allowed_origins in the program settings ` +
          `(PATCH /api/v1/programs/${programId}/settings)`,
      });
      await poll(() => tab.consoleErrors.some((m) => /CORS/.test(m)), 'Chromium reports the CORS refusal');
      assert.deepEqual(await context.cookies(refused), [], 'no cookie on the refused origin');
      // A later page of the visit (no referral parameter) still knows.
      await tab.goto(refused, { timeout });
      await tab.waitForFunction(() => window.svc && typeof window.svc.clickId === 'function', null, { timeout, polling: 50 });
      const later = await tab.evaluate(() => window.svc.lead({ customer_key: 'cust-unrecorded' }));
      assert.deepEqual(later, r.lead, 'a lead on a later page reports the same unrecorded click');
      log(`refused origin ${refusedOrigin}: ${r.warning}`);

      // An allowed origin, unknown code: 400 with the server's message.
      const unknown = await loadUnrecorded(tab, `${flags.page}?via=${CODE_UNKNOWN}`, { answered: true });
      loads++;
      assert.equal(unknown.click.status, 400);
      assert.equal(unknown.click.body.error.message, 'Referral link not found');
      checkUnrecorded(unknown, { status: 400, reason: '400 Referral link not found' });
      log(`unknown link: ${unknown.warning}`);

      if (flags['code-disabled']) {
        // A link that is turned off: 410 link_disabled (typed envelope).
        const off = await loadUnrecorded(tab, `${flags.page}?via=${encodeURIComponent(flags['code-disabled'])}`, { answered: true });
        loads++;
        assert.equal(off.click.status, 410);
        assert.equal(off.click.body.error.code, 'link_disabled');
        checkUnrecorded(off, { status: 410, reason: `410 ${off.click.body.error.message}` });
        log(`disabled link: ${off.warning}`);
      }
      assert.deepEqual(tab.errors, [], 'svc.js threw into the page on an unrecorded click');
      await tab.close();
    }

    assert.deepEqual(pageErrors, [], 'svc.js threw into the page');
    const cors = consoleErrors.filter((m) => /CORS|Access-Control/i.test(m));
    assert.deepEqual(cors, [], 'CORS refused a tracker call');
    log(`ok in ${Date.now() - started} ms`);
    process.stdout.write(JSON.stringify({ click_id: id, alt_click_id: altId || null, session_id: sessionId, page_loads: loads }) + '\n');
  } finally {
    if (context) await context.close().catch(() => {});
    rmSync(userDataDir, { recursive: true, force: true });
  }
}

main().catch(fail);
