// Drives Debian's Chromium through a new brand's whole journey on `make
// run`'s stack, through the pages only (no admin token, no API call of its
// own):
//   - a new person signs up through the stand-in identity provider (the
//     stack's DEV_LOGIN_EMAIL, --email here) and lands on Create program;
//   - creates a program holding commissions 0 days, so the hold rule
//     approves a commission at once; creates a live key; allows the origin
//     of a shop page this script serves (http://localhost:PORT);
//   - invites a partner (approved at once); opens the shop page through the
//     partner's referral link: the tracker from the Install snippet
//     records the click (the shop is reloaded until it does: the catalog
//     reaches tracking a moment after the console's answer);
//   - connects the stand-in payment processor from Settings (its Approve
//     page, back to #settings), then sends a test payment from the
//     processor's own form with the click id, so a sale and a commission
//     appear on Overview and Commissions, approved;
//   - opens a payout of all that is available, marks it paid with a
//     reference, and the partner's available balance reads $0.00;
//   - every console page (and Create program) at 1440 and 390 px: no
//     sideways scroll at 390, axe-core finds no serious or critical
//     violation, a screenshot journey-<page>-<width>.png under --shots;
//   - no Content-Security-Policy violation and no page error in the
//     console.
// Plain node, no test runner: exit 0 and one JSON line on stdout (what the
// Go test checks through the API) on success, exit 1 and the reason on
// stderr otherwise.
//
//   node journey.spec.mjs --base=URL --email=ADDRESS --reference=REF --shots=DIR \
//     [--chromium=/usr/bin/chromium] [--timeout-ms=20000]
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values: flags } = parseArgs({
  options: {
    base: { type: 'string', default: process.env.SVC_BASE_URL },
    email: { type: 'string', default: process.env.SVC_EMAIL },
    reference: { type: 'string', default: process.env.SVC_REFERENCE },
    shots: { type: 'string', default: process.env.SVC_SHOTS },
    chromium: { type: 'string', default: process.env.CHROMIUM_PATH || '/usr/bin/chromium' },
    'timeout-ms': { type: 'string', default: process.env.SVC_TIMEOUT_MS || '20000' },
  },
});
for (const k of ['base', 'email', 'reference', 'shots']) {
  if (!flags[k]) fail(new Error(`missing --${k}`));
}
const base = flags.base.replace(/\/+$/, '');
const timeout = Number(flags['timeout-ms']);
// How long what happens behind a step (events between services) may take
// to show on a page: the page is read again until then.
const settle = 4 * timeout;
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
];
const PAGES = ['overview', 'install', 'partners', 'commissions', 'payouts', 'settings'];
// The test payment: 49.00 USD; the program pays 10 %.
const AMOUNT = 4900;
const COMMISSION = '$4.90';

const pageErrors = [];
const consoleErrors = [];
const failedRequests = [];
const notes = [];

function fail(err) {
  process.stderr.write(`journey.spec: FAIL: ${err && err.stack ? err.stack : err}\n`);
  for (const m of pageErrors) process.stderr.write(`journey.spec: page error: ${m}\n`);
  for (const m of consoleErrors) process.stderr.write(`journey.spec: console error: ${m}\n`);
  for (const m of failedRequests) process.stderr.write(`journey.spec: request: ${m}\n`);
  for (const m of notes) process.stderr.write(`journey.spec: note: ${m}\n`);
  process.exit(1);
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// The brand's shop: a page on its own origin whose head holds the snippet
// the Install page shows (set once the program exists).
let snippet = '';
const shop = createServer((req, res) => {
  if (new URL(req.url, 'http://shop').pathname !== '/') {
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('not found');
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Journey shop</title>
${snippet}
</head><body><main><h1>Journey shop</h1><p>Everything a visitor from a partner's link might buy.</p></main></body></html>
`);
});

let browser;
let consolePage;
try {
  mkdirSync(flags.shots, { recursive: true });
  await new Promise((resolve, reject) => { shop.once('error', reject); shop.listen(0, '127.0.0.1', resolve); });
  // Chromium resolves localhost to loopback itself: the origin a newcomer's
  // own machine most often serves from.
  const origin = `http://localhost:${shop.address().port}`;

  browser = await chromium.launch({ executablePath: flags.chromium, args: ARGS, timeout });
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  consolePage = page;
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('response', (r) => { if (r.status() >= 400) failedRequests.push(`${r.status()} ${r.request().method()} ${r.url()}`); });
  // Mark paid asks for the transfer's reference.
  page.on('dialog', (d) => (d.type() === 'prompt' ? d.accept(flags.reference) : d.accept()).catch(() => {}));

  const said = async (re, what) => {
    await page.waitForFunction((src) => new RegExp(src).test((document.getElementById('status')?.textContent || '')), re.source, { timeout })
      .catch(async () => { throw new Error(`${what}: the status says ${JSON.stringify(await page.locator('#status').textContent())}`); });
  };
  const onPage = async (route, pid) => {
    await page.waitForFunction((want) => document.body.getAttribute('data-page') === want, `${route}:${pid}`, { timeout });
  };
  let programId = '';
  const go = async (route) => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: route[0].toUpperCase() + route.slice(1), exact: true }).click();
    await onPage(route, programId);
    check(await page.locator(`#page-${route}`).isVisible(), `#page-${route} is not shown on #${route}`);
  };
  // again shows the page afresh (a person reloading it), on the program.
  const again = async (route) => {
    // The same address again would only move to its fragment: reload.
    const target = `${base}/dashboard/?program=${programId}#${route}`;
    if (page.url() === target) await page.reload(); else await page.goto(target);
    await page.locator('#app').waitFor({ state: 'visible' });
    await onPage(route, programId);
  };
  // until reads the page again (again) until read() holds, within settle.
  const until = async (route, read, what) => {
    const end = Date.now() + settle;
    let last;
    for (;;) {
      last = await read();
      if (last === true) return;
      check(Date.now() < end, `${what}: not within ${settle} ms (last seen: ${JSON.stringify(last)})`);
      await page.waitForTimeout(500);
      await again(route);
    }
  };

  const audits = {};
  const audit = async (label) => {
    await page.evaluate(axeSource);
    const found = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
    });
    const bad = found.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    check(bad.length === 0, `axe on ${label}: ${JSON.stringify(bad)}`);
    audits[label] = found.map((v) => `${v.id} (${v.impact})`);
  };
  const shots = [];
  const capture = async (route, width) => {
    await page.setViewportSize(width === 1440 ? { width: 1440, height: 900 } : { width: 390, height: 844 });
    await page.waitForFunction((w) => document.documentElement.clientWidth <= w, width);
    if (width === 390) {
      await page.waitForFunction(() => document.documentElement.scrollWidth - document.documentElement.clientWidth <= 1, null, { timeout: 5000 }).catch(() => {});
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      check(overflow <= 1, `#${route} scrolls sideways by ${overflow}px at 390px`);
    }
    await audit(`${route}-${width}`);
    const file = join(flags.shots, `journey-${route}-${width}.png`);
    await page.screenshot({ path: file, fullPage: true });
    shots.push(file);
  };

  // ---- Sign up: the provider signs the new person in; the console has
  // no program for them yet and opens Create program.
  await page.goto(`${base}/dashboard/`);
  await page.locator('#signin').waitFor({ state: 'visible' });
  await page.getByRole('link', { name: 'Sign in' }).click();
  const back = Date.now() + timeout;
  const home = () => new URL(page.url()).origin === base && new URL(page.url()).pathname.startsWith('/dashboard/');
  while (!home()) {
    check(Date.now() < back, `sign-in did not come back to the console (at ${page.url()})`);
    if (new URL(page.url()).origin !== base) {
      const submit = page.locator('button[type=submit], input[type=submit]').first();
      if (await submit.isVisible().catch(() => false)) await submit.click().catch(() => {});
    }
    await page.waitForTimeout(100);
  }
  await page.locator('#page-create').waitFor({ state: 'visible' });
  await said(/You have no program yet/, 'a new person');
  check((await page.getByTestId('who').textContent()).trim() === flags.email, `signed in as ${await page.getByTestId('who').textContent()}, not ${flags.email}`);
  check(!page.url().includes('session='), `the session stayed in the address: ${page.url()}`);
  await capture('create', 1440);
  await capture('create', 390);
  await page.setViewportSize({ width: 1440, height: 900 });

  // ---- Create the program: 10 % of each sale, hold 0 days.
  const programName = `Journey shop ${Date.now()}`;
  const create = page.locator('#create-form');
  await create.getByLabel('Name', { exact: true }).fill(programName);
  await create.getByLabel('Domain', { exact: true }).fill('journey-shop.example');
  await create.getByLabel('Commission type').selectOption('percent');
  await create.getByLabel('Commission rate').fill('10');
  check(await create.getByLabel('Hold period (days)').inputValue() === '30', 'the hold period does not start at 30 days');
  await create.getByLabel('Hold period (days)').fill('0');
  const created = page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/api/v1/programs');
  await create.getByRole('button', { name: 'Create program' }).click();
  const cr = await created;
  check(cr.status() === 201, `creating the program answered ${cr.status()}`);
  check((await cr.json()).data.hold_days === 0, 'the program was not created with a 0-day hold');
  await said(/is created/, 'creating a program');
  await page.waitForFunction(() => location.hash === '#install');
  programId = await page.locator('#program').inputValue();
  check(/^\d+$/.test(programId), `no program picked after creating one: ${programId}`);
  await onPage('install', programId);
  check(await page.getByRole('navigation', { name: 'Console' }).isVisible(), 'no pages offered once the program exists');

  // ---- Install: the snippet goes into the shop; a live key; the origin.
  snippet = (await page.getByTestId('snippet').textContent()).trim();
  check(snippet === `<script src="${base}/svc.js" data-program-id="${programId}" async></script>`, `snippet: ${snippet}`);
  await page.getByLabel('Mode').selectOption('live');
  await page.getByRole('button', { name: 'Create key' }).click();
  await said(/A live key is created/, 'creating a live key');
  const whole = (await page.getByTestId('new-key').textContent()).trim();
  check(/^svc_live_\S{20,}$/.test(whole), `the new key is not shown whole: ${JSON.stringify(whole)}`);
  await page.getByTestId('key-0').waitFor();
  await page.getByLabel('Origin to allow').fill(origin);
  await page.getByRole('button', { name: 'Add origin' }).click();
  await said(new RegExp(`Added ${escape(origin)}`), 'adding the shop\'s origin');
  check((await page.getByTestId('origins').textContent()).includes(origin), 'the shop\'s origin is not listed');

  // ---- Partners: invite one, with a link.
  await go('partners');
  const code = `journey${Date.now().toString(36)}`;
  const partnerName = 'Journey Partner';
  const invite = page.locator('#invite-form');
  await invite.getByLabel('Name', { exact: true }).fill(partnerName);
  await invite.getByLabel('Email', { exact: true }).fill(`partner-${Date.now()}@partners.example`);
  await invite.getByLabel('Link code (optional)').fill(code);
  const invited = page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname === `/api/v1/programs/${programId}/partners`);
  await page.getByRole('button', { name: 'Invite partner' }).click();
  const ir = await invited;
  check(ir.status() === 201 || ir.status() === 200, `inviting answered ${ir.status()}`);
  const partnerId = String((await ir.json()).data.partner.id);
  await said(new RegExp(`is invited, with link ${code}`), 'inviting a partner');
  // An invited partner is approved in the program at once.
  await page.getByTestId('partner-0').filter({ hasText: partnerName }).waitFor();
  const listed = await page.getByTestId('partner-0').innerText();
  check(listed.includes('approved') && listed.includes(code), `the invited partner is listed as ${JSON.stringify(listed)}`);

  // ---- The shop, opened through the partner's link: the tracker records
  // the click. The link and the origin reach tracking a moment after the
  // console's answers, so the visitor reloads until the click is taken.
  const visitor = await context.newPage();
  visitor.setDefaultTimeout(timeout);
  const shopErrors = [];
  visitor.on('pageerror', (e) => shopErrors.push(String(e)));
  const landing = `${origin}/?via=${code}`;
  let clickId = '';
  const clickEnd = Date.now() + settle;
  for (let tries = 1; !clickId; tries++) {
    const answered = visitor.waitForResponse((r) => r.url() === `${base}/api/v1/track/click` && r.request().method() === 'POST', { timeout })
      .then((r) => r, () => null);
    await visitor.goto(landing);
    const r = await answered;
    if (r && r.status() === 200) {
      clickId = (await r.json()).click_id;
      break;
    }
    notes.push(`shop load ${tries}: the click ${r ? `answered ${r.status()}` : 'got no answer (CORS refusal?)'}`);
    check(Date.now() < clickEnd, `the shop's click was not recorded within ${settle} ms`);
    await visitor.waitForTimeout(500);
  }
  check(/^cust_\d+_\d+$/.test(clickId), `click id ${clickId}`);
  await visitor.waitForFunction((id) => window.svc && window.svc.clickId() === id, clickId);
  await visitor.screenshot({ path: join(flags.shots, 'journey-shop-1440.png'), fullPage: true });
  check(shopErrors.length === 0, `the shop page threw: ${shopErrors.join('; ')}`);

  // ---- Install: "Check my installation" shows the real click (analytics
  // applies it a moment after tracking answered), and no test click.
  await go('install');
  await until('install', async () => {
    await page.getByRole('button', { name: 'Check my installation' }).click();
    await page.getByTestId('check-real-click').waitFor();
    const real = await page.getByTestId('check-real-click').textContent();
    const test = await page.getByTestId('check-test-click').textContent();
    return (/UTC/.test(real) && test === 'None seen yet') || { real, test };
  }, 'the real click on Install');

  // ---- Settings: connect the stand-in processor (its Approve page, then
  // back to #settings, connected).
  await go('settings');
  await page.getByRole('button', { name: 'Connect payment processor' }).click();
  await page.waitForURL((u) => u.origin !== base, { timeout });
  const processor = new URL(page.url()).origin;
  check(new URL(page.url()).pathname === '/oauth/authorize', `the processor connect went to ${page.url()}`);
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.waitForURL((u) => u.origin === base && u.pathname === '/dashboard/' && u.hash === '#settings', { timeout });
  await onPage('settings', programId);
  await until('settings', async () => ((await page.getByTestId('pay-connected').textContent()) === 'Connected') || await page.getByTestId('pay-connected').textContent(),
    'the processor shown connected');
  const account = (await page.getByTestId('pay-account').textContent()).trim();
  check(/^acct_\w+$/.test(account), `connected account ${account}`);

  // ---- The processor's own "send a test payment" form: 49.00 USD paid
  // by the visitor (the click id attributes it to the partner).
  const proc = await context.newPage();
  proc.setDefaultTimeout(timeout);
  await proc.goto(`${processor}/test-payment`);
  await proc.getByLabel('Connected account').selectOption(account);
  await proc.getByLabel('Amount (cents)').fill(String(AMOUNT));
  await proc.getByLabel('Currency').fill('usd');
  await proc.getByLabel(/^Click id/).fill(clickId);
  await proc.getByLabel(/^Refund/).fill('0');
  await proc.getByRole('button', { name: 'Send' }).click();
  await proc.getByRole('status').filter({ hasText: 'Sent.' }).waitFor();
  const delivered = await proc.locator('li').allTextContents();
  check(delivered.length === 1 && /^checkout\.session\.completed evt_\S+: webhook answered 200$/.test(delivered[0]), `deliveries: ${JSON.stringify(delivered)}`);
  await proc.screenshot({ path: join(flags.shots, 'journey-processor-payment-1440.png'), fullPage: true });
  await proc.close();

  // ---- Commissions: the sale's commission, approved by the hold rule
  // (0 days: at once), 10 % of 49.00.
  await again('commissions');
  await until('commissions', async () => {
    const rows = await page.locator('#commission-list [data-testid^="commission-"]').allInnerTexts();
    return (rows.length === 1 && rows[0].includes(COMMISSION) && rows[0].includes('approved') && rows[0].includes('sale') && rows[0].includes(clickId)) || rows;
  }, 'the sale\'s commission, approved, on Commissions');

  // ---- Overview: the click, the sale and the commission in the figures.
  await again('overview');
  await until('overview', async () => {
    await page.waitForFunction(() => (document.body.getAttribute('data-loaded') || '').length > 0);
    const seen = {};
    for (const k of ['totalClicks', 'totalSales', 'totalRevenue', 'totalPartnersCommission']) seen[k] = await page.getByTestId(`kpi-${k}`).textContent();
    seen.partner = await page.locator('#partners').innerText();
    return (Number(seen.totalClicks) >= 1 && seen.totalSales === '1' && seen.totalRevenue === '$49.00' && seen.totalPartnersCommission === COMMISSION &&
      seen.partner.includes(partnerName)) || seen;
  }, 'the sale and its commission on Overview');

  // ---- Payouts: all that is available, then paid.
  await go('payouts');
  const row = page.getByTestId('balance-0');
  await until('payouts', async () => {
    const r = await row.innerText().catch(() => '');
    return (r.includes(`Partner #${partnerId}`) && (r.match(/\$4\.90/g) || []).length >= 3) || r;
  }, 'the partner\'s balance on Payouts');
  check((await page.locator('#balance-list [data-testid^="balance-"]').count()) === 1, 'more than one balance on Payouts');
  await row.getByRole('button', { name: 'Open payout' }).click();
  await said(new RegExp(`A payout for Partner #${partnerId} is open`), 'opening a payout');
  // The payout heads the history, open, with its actions.
  const payRow = page.getByTestId('payout-0');
  const pay = payRow.getByRole('button', { name: /^Mark paid: payout \d+$/ });
  await pay.waitFor();
  const payoutId = (await pay.getAttribute('aria-label')).replace(/^Mark paid: payout /, '');
  const opened = await payRow.innerText();
  check(opened.includes(COMMISSION) && /open/.test(opened) && opened.includes(`Partner #${partnerId}`), `the open payout is not shown: ${opened}`);
  await pay.click();
  await said(new RegExp(`Payout of ${escape(COMMISSION)} is marked paid`), 'marking the payout paid');
  await page.getByTestId('payout-0').filter({ hasText: flags.reference }).waitFor();
  const paidRow = await page.getByTestId('payout-0').innerText();
  check(paidRow.includes('paid') && paidRow.includes(COMMISSION), `the paid payout: ${paidRow}`);
  await until('payouts', async () => {
    const cells = await row.locator('td').allInnerTexts();
    // Partner, currency, earned, paid, balance, open payouts, available.
    return (cells[1] === 'USD' && cells[2] === COMMISSION && cells[3] === COMMISSION && cells[4] === '$0.00' && cells[5] === '$0.00' &&
      cells[6] === '$0.00') || cells;
  }, 'the partner\'s money after the payout');

  // ---- Every page, at both widths, audited and kept.
  for (const width of [1440, 390]) {
    await page.setViewportSize(width === 1440 ? { width: 1440, height: 900 } : { width: 390, height: 844 });
    for (const route of PAGES) {
      await go(route);
      if (route === 'overview') await page.waitForFunction(() => (document.body.getAttribute('data-loaded') || '').length > 0);
      await capture(route, width);
    }
  }

  const csp = consoleErrors.filter((m) => /Content Security Policy/i.test(m));
  check(csp.length === 0, `CSP violations: ${csp.join('; ')}`);
  check(pageErrors.length === 0, `page errors: ${pageErrors.join('; ')}`);
  const unexpected = failedRequests.filter((m) => !/\/favicon\.ico$/.test(m));
  check(unexpected.length === 0, `console requests refused: ${unexpected.join('; ')}`);
  process.stdout.write(JSON.stringify({ ok: true, program: programId, partner: partnerId, code, click_id: clickId, origin, account,
    payout: payoutId, shots, lesserViolations: audits, notes }) + '\n');
} catch (err) {
  // What the console showed when it failed, beside the other shots.
  if (consolePage) await consolePage.screenshot({ path: join(flags.shots, 'journey-failure.png'), fullPage: true }).catch(() => {});
  fail(err);
} finally {
  if (browser) await browser.close().catch(() => {});
  shop.close();
}
