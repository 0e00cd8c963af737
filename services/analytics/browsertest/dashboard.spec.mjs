// Drives Debian's Chromium through the brand dashboard (/dashboard/) behind
// the gateway: signs in through the page (the sign-in link, the OpenID
// provider's page, back to the dashboard), picks the program, and checks
// that the figures shown are the ones the Go test read from the API; then
// saves screenshots at a desktop (1440 px) and a phone (390 px) width and
// checks the phone layout does not scroll sideways.
// Before that, a link carrying someone else's session in its fragment
// (login CSRF: /dashboard/#session=<theirs>) must not sign the tab in,
// with no nonce and with a guessed one.
// Plain node, no test runner: exit 0 and one JSON line on stdout on
// success, exit 1 and the reason on stderr otherwise.
//
//   node dashboard.spec.mjs --base=URL --program-id=N --expect=JSON --shots=DIR \
//     --foreign-session=TOKEN [--chromium=/usr/bin/chromium] [--timeout-ms=20000]
//
// --expect is {"period": "7d", "text": {"<data-testid>": "<text>"}, "days": N,
//   "steps": {"pageview": "complete", …}}: every element named in text must
// show exactly that text.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values: flags } = parseArgs({
  options: {
    base: { type: 'string', default: process.env.SVC_BASE_URL },
    'program-id': { type: 'string', default: process.env.SVC_PROGRAM_ID },
    expect: { type: 'string', default: process.env.SVC_EXPECT },
    shots: { type: 'string', default: process.env.SVC_SHOTS },
    'foreign-session': { type: 'string', default: process.env.SVC_FOREIGN_SESSION },
    chromium: { type: 'string', default: process.env.CHROMIUM_PATH || '/usr/bin/chromium' },
    'timeout-ms': { type: 'string', default: process.env.SVC_TIMEOUT_MS || '20000' },
  },
});
for (const k of ['base', 'program-id', 'expect', 'shots', 'foreign-session']) {
  if (!flags[k]) fail(new Error(`missing --${k}`));
}
const base = flags.base.replace(/\/+$/, '');
const programId = String(flags['program-id']);
const expected = JSON.parse(flags.expect);
const timeout = Number(flags['timeout-ms']);

// Chromium on CI machines: no sandbox (root in a container), no GPU, and
// nothing that phones home during the test.
const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
];

const pageErrors = [];
const consoleErrors = [];
const failedRequests = [];

function fail(err) {
  process.stderr.write(`dashboard.spec: FAIL: ${err && err.stack ? err.stack : err}\n`);
  for (const m of pageErrors) process.stderr.write(`dashboard.spec: page error: ${m}\n`);
  for (const m of consoleErrors) process.stderr.write(`dashboard.spec: console error: ${m}\n`);
  for (const m of failedRequests) process.stderr.write(`dashboard.spec: request: ${m}\n`);
  process.exit(1);
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

const profile = mkdtempSync(join(tmpdir(), 'svc-dashboard-'));
let browser;
try {
  mkdirSync(flags.shots, { recursive: true });
  browser = await chromium.launch({ executablePath: flags.chromium, args: ARGS, timeout });
  // The page runs in Kolkata (+5:30), so it offers that zone beside UTC.
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, timezoneId: 'Asia/Kolkata' });
  const page = await context.newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('response', (r) => { if (r.status() >= 400) failedRequests.push(`${r.status()} ${r.url()}`); });
  const bearers = [];
  page.on('request', (r) => { const a = r.headers()['authorization']; if (a) bearers.push(a); });

  // Someone else's session in the fragment: first in a tab that never
  // started a sign-in, then with a guessed nonce in a tab that did (the
  // sign-in offer stored one). Neither is kept or sent anywhere, the
  // fragment leaves the address bar, and the page says why.
  const foreign = flags['foreign-session'];
  const expires = new Date(Date.now() + 3600e3).toISOString().replace(/\.\d+Z$/, 'Z');
  for (const frag of [`session=${foreign}&expires_at=${expires}`,
    `session=${foreign}&expires_at=${expires}&tab_nonce=guessed-nonce-0123456789`]) {
    await page.goto('about:blank');
    await page.goto(`${base}/dashboard/#${frag}`);
    await page.locator('#signin').waitFor({ state: 'visible' });
    await page.locator('#error').waitFor({ state: 'visible' });
    const said = (await page.locator('#error').textContent()) || '';
    check(said.includes('not started from this tab'), `a foreign fragment (${frag.slice(-40)}) was not refused in words: ${JSON.stringify(said)}`);
    check(await page.locator('#app').isHidden(), 'a foreign session opened the dashboard');
    check(!page.url().includes('session='), `the foreign session stayed in the address bar: ${page.url()}`);
    const kept = await page.evaluate(() => sessionStorage.getItem('svc_dashboard_session'));
    check(kept === null, 'a foreign session was kept in sessionStorage');
    check(!bearers.some((a) => a.includes(foreign)), 'a foreign session was sent to the API');
  }

  // Signed out: the page offers the sign-in, and it leads back here (the
  // tab's own sign-in, its nonce, is kept).
  await page.goto(`${base}/dashboard/`);
  await page.locator('#signin').waitFor({ state: 'visible' });
  await page.getByRole('link', { name: 'Sign in' }).click();
  // Through the provider and back. The provider's page may submit itself
  // (the local one does) or show one button to go on: press it only while
  // that page is the one shown.
  const back = Date.now() + timeout;
  const home = () => new URL(page.url()).origin === new URL(base).origin && new URL(page.url()).pathname.startsWith('/dashboard/');
  while (!home()) {
    check(Date.now() < back, `sign-in did not come back to the dashboard (at ${page.url()})`);
    if (new URL(page.url()).origin !== new URL(base).origin) {
      const go = page.locator('button[type=submit], input[type=submit]').first();
      if (await go.isVisible().catch(() => false)) await go.click().catch(() => {});
    }
    await page.waitForTimeout(100);
  }
  await page.locator('#app').waitFor({ state: 'visible' });
  check(!page.url().includes('session='), `the session stayed in the address bar: ${page.url()}`);

  // Controls are labelled: reachable by their label text.
  await page.getByLabel('Program', { exact: true }).selectOption(programId);
  await page.getByLabel('Period', { exact: true }).selectOption(expected.period || '7d');
  const loaded = `${programId}?period=${expected.period || '7d'}`;
  await page.waitForFunction((want) => document.body.getAttribute('data-loaded') === want, loaded, { timeout });

  for (const [id, want] of Object.entries(expected.text || {})) {
    const got = (await page.getByTestId(id).textContent() || '').trim();
    check(got === want, `${id} shows ${JSON.stringify(got)}, the API says ${JSON.stringify(want)}`);
  }
  if (expected.days) {
    const days = await page.locator('#chart').getAttribute('data-days');
    check(days === String(expected.days), `the chart has ${days} days, want ${expected.days}`);
    check(await page.locator('#chart canvas').count() > 0, 'no chart drawn');
  }
  if ('estimated' in expected) {
    // Days converted at an earlier rate are said under the range, as the
    // API's meta.fxEstimatedDays counts them; none, nothing said.
    const range = (await page.locator('#range').textContent()) || '';
    const said = /Money of (\d+) days? converted to dollars at an earlier day's exchange rate/.exec(range);
    const n = said ? Number(said[1]) : 0;
    check(n === expected.estimated, `the range says ${n} estimated-rate days, the API ${expected.estimated}: ${JSON.stringify(range)}`);
  }
  for (const [step, want] of Object.entries(expected.steps || {})) {
    const got = await page.getByTestId(`step-${step}`).getAttribute('data-status');
    check(got === want, `integration step ${step} is ${got}, the API says ${want}`);
  }
  await page.screenshot({ path: join(flags.shots, 'dashboard-1440.png'), fullPage: true });

  // The brand's own days: the browser's zone, asked of the routes.
  // (ICU may name Kolkata by its older alias, Asia/Calcutta.)
  const zone = await page.locator('#timezone option').nth(1).getAttribute('value', { timeout });
  check(zone === 'Asia/Kolkata' || zone === 'Asia/Calcutta', `the page offers ${zone}, not the browser's zone`);
  await page.getByLabel('Days in', { exact: true }).selectOption(zone);
  await page.waitForFunction((want) => document.body.getAttribute('data-loaded') === want,
    `${loaded}&timezone=${encodeURIComponent(zone)}`, { timeout });
  const range = (await page.locator('#range').textContent()) || '';
  check(range.includes(`(${zone})`), `the range does not name the zone: ${JSON.stringify(range)}`);
  await page.getByLabel('Days in', { exact: true }).selectOption('');
  await page.waitForFunction((want) => document.body.getAttribute('data-loaded') === want, loaded, { timeout });

  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => document.documentElement.clientWidth <= 390);
  // The chart follows its card on the next frame (a ResizeObserver).
  await page.waitForFunction(() => document.documentElement.scrollWidth - document.documentElement.clientWidth <= 1, null, { timeout: 5000 }).catch(() => {});
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  check(overflow <= 1, `the page scrolls sideways by ${overflow}px at 390px`);
  for (const id of Object.keys(expected.text || {})) {
    check(await page.getByTestId(id).isVisible(), `${id} hidden at 390px`);
  }
  await page.screenshot({ path: join(flags.shots, 'dashboard-390.png'), fullPage: true });

  // Signing out ends the session on the server, not only in the tab: the
  // page sends its own token to the sign-out route, and afterwards that
  // token opens nothing (a copy taken from the tab is useless).
  const used = bearers.filter((a) => !a.includes(foreign)).pop();
  check(used && used.startsWith('Bearer ') && used.length > 20, 'the dashboard sent no session token');
  const signOutSent = page.waitForRequest((r) => r.method() === 'POST' && new URL(r.url()).pathname === '/api/v1/dashboard/auth/signout');
  const signOutAnswered = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/dashboard/auth/signout');
  await page.locator('#signout').click();
  const sent = await signOutSent;
  check(sent.headers()['authorization'] === used, 'the sign-out did not send the tab\'s session token');
  const answered = await signOutAnswered;
  check(answered.status() === 204, `the sign-out answered ${answered.status()}`);
  await page.locator('#signin').waitFor({ state: 'visible' });
  check(await page.evaluate(() => sessionStorage.getItem('svc_dashboard_session')) === null, 'the session stayed in sessionStorage');
  const after = await page.evaluate(async (a) => (await fetch('/api/v1/dashboard/me', { headers: { Authorization: a } })).status, used);
  check(after === 401, `the signed-out token still opens /api/v1/dashboard/me: ${after}`);

  check(pageErrors.length === 0, `page errors: ${pageErrors.join('; ')}`);
  process.stdout.write(JSON.stringify({ ok: true, shots: [join(flags.shots, 'dashboard-1440.png'), join(flags.shots, 'dashboard-390.png')] }) + '\n');
} catch (err) {
  fail(err);
} finally {
  if (browser) await browser.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}
