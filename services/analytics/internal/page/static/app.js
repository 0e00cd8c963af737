// The brand dashboard: one page over the public dashboard API, like any
// client of it. The session token arrives once in the URL fragment
// (#session=…, never sent to a server or a Referer) or from the session
// route named by config.json, and is kept in sessionStorage for this tab.
// A fragment is kept only when it carries the nonce this tab stored before
// it started the sign-in: anyone can make a link with their own session in
// it, and following it must not sign you in to their workspace.
(function () {
  'use strict';

  var TOKEN_KEY = 'svc_dashboard_session';
  var NONCE_KEY = 'svc_dashboard_signin_nonce';
  // The console page (#settings, …) a sign-in started from, to return to.
  var ROUTE_KEY = 'svc_console_route';
  var state = { config: null, token: '', programs: [], chart: null, seq: 0, route: 'overview', me: null, hookAlert: null, created: {} };
  var $ = function (id) { return document.getElementById(id); };

  var KPIS = [
    ['totalClicks', 'Clicks', 'int', 'clicksTrend'],
    ['totalLeads', 'Leads', 'int', 'leadsTrend'],
    ['totalConversions', 'Conversions', 'int', 'conversionsTrend'],
    ['totalRevenue', 'Revenue', 'usd', 'revenueTrend'],
    ['totalPartnersCommission', 'Commission', 'usd', 'commissionTrend'],
    // Ours, beside revenue and commission: why a partner's balance is
    // lower than the commission tile (refunds take their share back).
    ['totalRefunds', 'Refunds', 'int', null],
    ['totalRefundedAmount', 'Refunded', 'usd', null],
    ['conversionRate', 'Conversion rate', 'pct', null],
    ['averageOrderValue', 'Average order', 'usd', null],
    ['totalSales', 'Paid sales', 'int', 'salesTrend'],
    ['totalPartners', 'New partners', 'int', 'partnersTrend']
  ];

  function fmt(kind, v) {
    var n = Number(v || 0);
    if (kind === 'usd') return '$' + n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    if (kind === 'pct') return n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 }) + '%';
    return n.toLocaleString('en-US', { maximumFractionDigits: 0 });
  }

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'className') e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }

  function showError(msg) {
    var e = $('error');
    e.textContent = msg;
    e.hidden = !msg;
  }

  // api calls the dashboard API with the session; a 401 or 403 on the
  // session itself sends the user back to sign in.
  // opts: {method, body (sent as JSON)}. The error carries the envelope's
  // message (error.message), which the page shows as it is.
  function api(path, opts) {
    opts = opts || {};
    var headers = { Authorization: 'Bearer ' + state.token, Accept: 'application/json' };
    var init = { method: opts.method || 'GET', headers: headers, credentials: 'same-origin' };
    if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    return fetch(path, init)
      .then(function (r) {
        return r.text().then(function (t) {
          var body = null;
          try { body = t ? JSON.parse(t) : null; } catch (e) { body = null; }
          if (r.status === 401) { signOut(); throw new Error('Your session has ended: sign in again.'); }
          if (!r.ok) {
            var msg = body && body.error && (body.error.message || body.error) || ('HTTP ' + r.status);
            var err = new Error(typeof msg === 'string' ? msg : 'HTTP ' + r.status);
            err.status = r.status;
            // The field a refusal is about (error.details.field), so a
            // form can say it beside that field.
            err.field = (body && body.error && body.error.details && body.error.details.field) || '';
            throw err;
          }
          return body;
        });
      });
  }

  // takeToken takes a session from the fragment only when its tab_nonce is
  // the one this tab stored on starting the sign-in (used once); any other
  // fragment is dropped, and an earlier session of the tab stays.
  function takeToken() {
    var frag = new URLSearchParams(location.hash.replace(/^#/, ''));
    var token = frag.get('session');
    if (token) {
      var want = sessionStorage.getItem(NONCE_KEY);
      sessionStorage.removeItem(NONCE_KEY);
      var page0 = sessionStorage.getItem(ROUTE_KEY);
      sessionStorage.removeItem(ROUTE_KEY);
      history.replaceState(null, '', location.pathname + location.search);
      if (want && frag.get('tab_nonce') === want) {
        sessionStorage.setItem(TOKEN_KEY, token);
        // Back to the console page the sign-in was started from.
        if (page0) history.replaceState(null, '', location.pathname + location.search + '#' + page0);
      } else {
        showError('That sign-in link was not started from this tab, so it was ignored. Sign in here to continue.');
      }
    }
    return sessionStorage.getItem(TOKEN_KEY) || '';
  }

  // newNonce is 32 random URL-safe characters (the start route's tab_nonce).
  function newNonce() {
    var b = new Uint8Array(24);
    crypto.getRandomValues(b);
    return btoa(String.fromCharCode.apply(null, b)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  // signOut ends the session on the server too (its Bearer token): a
  // session token is signed, not stored, so only the sign-out makes every
  // service refuse it before its expiry.
  function signOut() {
    var token = state.token;
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = '';
    if (state.config && state.config.signOutURL) {
      var headers = token ? { Authorization: 'Bearer ' + token } : {};
      fetch(state.config.signOutURL, { method: 'POST', credentials: 'same-origin', headers: headers }).catch(function () {});
    }
    showSignIn();
  }

  function showSignIn() {
    $('app').hidden = true;
    $('signout').hidden = true;
    $('who').textContent = '';
    $('signin').hidden = false;
    signInLink();
  }

  // signInLink stores a fresh nonce in this tab and puts it in the link:
  // the sign-in hands it back beside the session.
  function signInLink() {
    var nonce = newNonce();
    sessionStorage.setItem(NONCE_KEY, nonce);
    var page = location.hash.replace(/^#/, '').split(/[?&/]/)[0];
    if (ROUTES.indexOf(page) >= 0) sessionStorage.setItem(ROUTE_KEY, page); else sessionStorage.removeItem(ROUTE_KEY);
    $('signin-link').href = state.config.signInURL + (state.config.signInURL.indexOf('?') < 0 ? '?' : '&') +
      'return_to=' + encodeURIComponent(location.pathname) + '&tab_nonce=' + encodeURIComponent(nonce);
  }

  function query() {
    var p = $('period').value;
    var tz = $('timezone').value ? '&timezone=' + encodeURIComponent($('timezone').value) : '';
    if (p === 'custom') {
      var from = $('date-from').value, to = $('date-to').value;
      if (!from || !to) return null;
      return 'dateFrom=' + encodeURIComponent(from) + '&dateTo=' + encodeURIComponent(to) + tz;
    }
    return 'period=' + encodeURIComponent(p) + tz;
  }

  // The browser's own time zone, offered beside UTC (the routes count the
  // days of either).
  function offerLocalZone() {
    var zone = '';
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch (e) { zone = ''; }
    if (!zone || zone === 'UTC' || zone === 'Etc/UTC') return;
    $('timezone').appendChild(el('option', { value: zone, text: zone }));
  }

  function renderKPIs(metrics) {
    var box = $('kpis');
    box.textContent = '';
    KPIS.forEach(function (k) {
      var trend = k[3] && metrics[k[3]];
      var t = null;
      if (trend) {
        var arrow = trend.trendDirection === 'up' ? '\u25B2' : trend.trendDirection === 'down' ? '\u25BC' : '\u25CF';
        var pct = trend.trend === null ? 'new' : Number(trend.trend).toFixed(1) + '%';
        t = el('div', { className: 'trend ' + trend.trendDirection, 'data-testid': 'trend-' + k[0],
          text: arrow + ' ' + pct + ' vs ' + fmt(k[2], trend.previous) + ' before',
          'aria-label': trend.trendDirection + ' ' + pct + ' against the previous period' });
      }
      box.appendChild(el('div', { className: 'kpi' }, [
        el('div', { className: 'label', text: k[1] }),
        el('div', { className: 'value', 'data-testid': 'kpi-' + k[0], text: fmt(k[2], metrics[k[0]]) }),
        t
      ]));
    });
  }

  // chartWidth is the chart card's inner width: the chart follows its card
  // (the canvas itself must not hold the page wide at a phone's width).
  function chartWidth() {
    var card = $('chart').parentElement;
    var cs = getComputedStyle(card);
    return Math.max(card.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight), 240);
  }

  function renderChart(rows) {
    var box = $('chart');
    var xs = rows.map(function (r) { return Date.parse(r.date + 'T00:00:00Z') / 1000; });
    var pick = function (f) { return rows.map(function (r) { return Number(r[f] || 0); }); };
    var data = [xs, pick('clicks'), pick('leads'), pick('conversions'), pick('revenue'), pick('commission')];
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    box.textContent = '';
    box.setAttribute('data-days', String(rows.length));
    var money = function (u, vals) { return vals.map(function (v) { return '$' + Number(v).toLocaleString('en-US'); }); };
    var opts = {
      width: chartWidth(),
      height: 300,
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'); },
      scales: { x: { time: true }, n: {}, usd: {} },
      // Daily data: ticks on whole days (never hours), dates as MM-DD.
      axes: [
        { incrs: [86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400, 91 * 86400, 365 * 86400], space: 50,
          values: function (u, vals) { return vals.map(function (v) { return new Date(v * 1000).toISOString().slice(5, 10); }); } },
        { scale: 'n', size: 60 },
        { scale: 'usd', side: 1, size: 80, grid: { show: false }, values: money }
      ],
      series: [
        {},
        { label: 'Clicks', scale: 'n', stroke: '#2458d3', width: 2 },
        { label: 'Leads', scale: 'n', stroke: '#8a4fd1', width: 2 },
        { label: 'Conversions', scale: 'n', stroke: '#137a3c', width: 2 },
        { label: 'Revenue ($)', scale: 'usd', stroke: '#c27c0e', width: 2, value: function (u, v) { return v == null ? '' : fmt('usd', v); } },
        { label: 'Commission ($)', scale: 'usd', stroke: '#b42318', width: 2, dash: [6, 4], value: function (u, v) { return v == null ? '' : fmt('usd', v); } }
      ]
    };
    state.chart = new uPlot(opts, data, box);
  }

  function renderStatus(d) {
    var list = $('checklist');
    list.textContent = '';
    var s = d.stepStatuses || {}, st = d.statistics || {};
    var pay = st.payments || {};
    var items = [
      ['pageview', 'Tracker installed', s.pageview, (st.pageview && st.pageview.testEventCount || 0) + ' test click(s) seen'],
      ['referrals', 'Signups tracked', s.referrals, (st.referrals && st.referrals.testEventCount || 0) + ' test lead(s) seen'],
      ['payments', 'Payments tracked', s.payments, pay.paymentTrackingMode === 's2s' ? 'Your server reports sales' :
        (pay.isProcessorConnected ? 'Processor connected' : 'Processor ' + (pay.processorConnectionStatus || 'not connected'))],
      ['partners', 'Partners approved', d.hasPartners ? 'complete' : 'pending', d.hasPartners ? 'At least one approved partner' : 'No approved partner yet']
    ];
    items.forEach(function (i) {
      var done = i[2] === 'complete';
      list.appendChild(el('li', { className: done ? 'complete' : 'pending', 'data-testid': 'step-' + i[0], 'data-status': done ? 'complete' : 'pending' }, [
        el('span', { className: 'mark', 'aria-hidden': 'true', text: done ? '\u2713' : '\u25CB' }),
        el('span', {}, [document.createTextNode(i[1] + (done ? ' (complete)' : ' (pending)')), el('small', { text: i[3] })])
      ]));
    });
  }

  function table(id, cols, rows, empty) {
    var box = $(id);
    box.textContent = '';
    if (!rows || rows.length === 0) { box.appendChild(el('p', { className: 'empty', text: empty })); return; }
    var head = el('tr', {}, cols.map(function (c) { return el('th', { scope: 'col', className: c[2] === 'name' ? '' : 'num', text: c[1] }); }));
    var body = rows.map(function (r, i) {
      return el('tr', {}, cols.map(function (c) {
        var v = r[c[0]];
        return el('td', { className: c[2] === 'name' ? 'name' : 'num', 'data-testid': id + '-' + i + '-' + c[0],
          text: c[2] === 'name' ? String(v == null ? '' : v) : fmt(c[2], v) });
      }));
    });
    box.appendChild(el('div', { className: 'table-wrap', tabindex: '0' }, [el('table', {}, [el('thead', {}, [head]), el('tbody', {}, body)])]));
  }

  function renderOptional(id, promise, cols, pickRows, empty) {
    return promise.then(function (body) {
      table(id, cols, pickRows(body), empty);
    }).catch(function (e) {
      $(id).textContent = '';
      $(id).appendChild(el('p', { className: 'empty', text: e.status === 404 ? 'Not available yet.' : 'Could not load: ' + e.message }));
    });
  }

  function load() {
    var pid = $('program').value;
    var q = query();
    if (!pid || !q) return;
    var seq = ++state.seq;
    showError('');
    var base = '/api/tracking/';
    var perf = api(base + 'performance/' + encodeURIComponent(pid) + '?' + q).then(function (body) {
      if (seq !== state.seq) return;
      var m = body.meta || {};
      $('range').textContent = (m.dateFrom || '').slice(0, 10) + ' to ' + (m.dateTo || '').slice(0, 10) + ' (' + (m.timezone || 'UTC') + '), compared with ' +
        (m.previousPeriod ? (m.previousPeriod.dateFrom || '').slice(0, 10) + ' to ' + (m.previousPeriod.dateTo || '').slice(0, 10) : 'the period before') +
        // The rate table had no rate for some days: their dollars use the
        // nearest earlier day's rate (meta.fxEstimatedDays).
        (m.fxEstimatedDays ? '. Money of ' + m.fxEstimatedDays + (m.fxEstimatedDays === 1 ? ' day' : ' days') +
          ' converted to dollars at an earlier day\'s exchange rate.' : '');
      renderKPIs(body.metrics || {});
      renderChart(body.data || []);
    });
    var status = api(base + 'status/' + encodeURIComponent(pid)).then(function (body) {
      if (seq === state.seq) renderStatus(body.data || {});
    });
    var dim = $('dimension').value;
    var sources = renderOptional('sources', api(base + 'sources/' + encodeURIComponent(pid) + '?' + q),
      [['name', 'Source', 'name'], ['clicks', 'Clicks', 'int'], ['leads', 'Leads', 'int'], ['conversions', 'Conversions', 'int'], ['revenue', 'Revenue', 'usd']],
      function (b) { return (b.data && b.data[dim]) || []; }, 'No traffic in this period.');
    var partners = renderOptional('partners', api(base + 'partners/' + encodeURIComponent(pid) + '?' + q),
      [['name', 'Partner', 'name'], ['clicks', 'Clicks', 'int'], ['conversions', 'Conversions', 'int'], ['revenue', 'Revenue', 'usd'], ['commission', 'Commission', 'usd']],
      function (b) { return b.data || []; }, 'No partner activity in this period.');
    return Promise.all([perf, status, sources, partners]).catch(function (e) { showError(e.message); })
      .then(function () { if (seq === state.seq) document.body.setAttribute('data-loaded', pid + '?' + q); });
  }

  // ---- The console: hash-routed pages over the public console routes.

  var ROUTES = ['overview', 'install', 'partners', 'commissions', 'payouts', 'webhooks', 'settings', 'create'];
  var PAGE_SIZE = 25;

  function pid() { return $('program').value; }
  function programBase() { return '/api/v1/programs/' + encodeURIComponent(pid()); }
  function currentProgram() {
    var id = pid();
    for (var i = 0; i < state.programs.length; i++) if (String(state.programs[i].id) === id) return state.programs[i];
    return null;
  }

  // canWrite: the member's permissions on the program picked (from /me,
  // or the programs list when /me did not say).
  function canWrite() {
    var p = currentProgram();
    return !!(p && (p.permissions || []).indexOf('tracking:write') >= 0);
  }

  // say puts what happened in the live region (read out by screen readers).
  function say(msg) {
    var s = $('status');
    s.textContent = '';
    // A fresh text node, so the same message twice is announced twice.
    window.setTimeout(function () { s.textContent = msg; }, 10);
  }

  // fail says a change or load did not happen, with the envelope's message.
  function fail(what) {
    return function (e) { say(what + ': ' + e.message); return false; };
  }

  // money formats integer minor units of a currency (VND has no decimals,
  // USD and EUR two): Intl knows each currency's exponent.
  function money(minor, currency) {
    var cur = String(currency || 'USD').toUpperCase();
    var f;
    try { f = new Intl.NumberFormat('en-US', { style: 'currency', currency: cur }); } catch (e) { return String(minor) + ' ' + cur; }
    var digits = f.resolvedOptions().maximumFractionDigits;
    return f.format(Number(minor || 0) / Math.pow(10, digits));
  }

  function when(iso) {
    if (!iso) return '\u2014';
    var d = new Date(iso);
    if (isNaN(d.getTime())) return String(iso);
    return d.toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
  }

  function text(v) { return v === null || v === undefined || v === '' ? '\u2014' : String(v); }

  function button(label, cls, onClick, attrs) {
    var b = el('button', Object.assign({ type: 'button', className: cls || 'secondary', text: label }, attrs || {}));
    b.addEventListener('click', function () {
      b.disabled = true;
      Promise.resolve().then(onClick).catch(function () {}).then(function () { b.disabled = false; });
    });
    return b;
  }

  // grid renders rows as a table: cols are [header, cell(row) -> string|Node, className].
  function grid(box, cols, rows, empty, testid) {
    box.textContent = '';
    if (!rows || rows.length === 0) { box.appendChild(el('p', { className: 'empty', text: empty })); return; }
    // A column of buttons still has a header, for screen readers only.
    var head = el('tr', {}, cols.map(function (c) {
      return c[0] ? el('th', { scope: 'col', className: c[2] || '', text: c[0] }) : el('th', { scope: 'col' }, [el('span', { className: 'visually-hidden', text: 'Actions' })]);
    }));
    var body = rows.map(function (r, i) {
      return el('tr', { 'data-testid': testid + '-' + i }, cols.map(function (c) {
        var v = c[1](r);
        // data-label: the header a phone shows beside the cell when the
        // table is stacked into one card a row (app.css).
        var td = el('td', { className: c[2] || '', 'data-label': c[0] });
        if (v instanceof Node) td.appendChild(v); else td.textContent = v;
        return td;
      }));
    });
    box.appendChild(el('div', { className: 'table-wrap', tabindex: '0' }, [el('table', { className: 'stack' }, [el('thead', {}, [head]), el('tbody', {}, body)])]));
  }

  function problem(box, e) {
    box.textContent = '';
    var msg = e.status === 404 || e.status === 405 ? 'Not available yet on this server.' : 'Could not load: ' + e.message;
    box.appendChild(el('p', { className: 'empty', 'data-testid': 'load-error', text: msg }));
  }

  // Pager keeps the cursors seen so far: Next follows next_cursor (or
  // meta.next_cursor / meta.cursor; pick names another field, for an answer
  // that pages two lists), Previous goes back one page.
  function Pager(boxId, fetchPage, pick) {
    this.box = $(boxId);
    this.fetchPage = fetchPage;
    this.pick = pick || nextCursor;
    this.stack = [''];
  }
  Pager.prototype.reset = function () { this.stack = ['']; return this.load(); };
  Pager.prototype.load = function () {
    var self = this;
    var cursor = this.stack[this.stack.length - 1];
    return this.fetchPage(cursor).then(function (body) {
      var next = self.pick(body);
      self.box.textContent = '';
      if (self.stack.length > 1) {
        self.box.appendChild(button('Previous page', 'secondary', function () { self.stack.pop(); return self.load(); }));
      }
      if (next) {
        self.box.appendChild(button('Next page', 'secondary', function () { self.stack.push(next); return self.load(); }));
      }
      return body;
    }, function (e) { self.box.textContent = ''; throw e; });
  };

  function nextCursor(body) {
    if (!body) return '';
    if (body.next_cursor) return body.next_cursor;
    var m = body.meta || {};
    return m.next_cursor || m.nextCursor || m.cursor || '';
  }

  function withCursor(path, cursor, extra, name) {
    var q = new URLSearchParams(extra || {});
    q.set('limit', String(PAGE_SIZE));
    if (cursor) q.set(name || 'cursor', cursor);
    return path + '?' + q.toString();
  }

  function list(body) { return body && Array.isArray(body.data) ? body.data : []; }

  // csv downloads a list as CSV: the same URL asked for text/csv with the
  // session header, saved from a blob (a plain link could not send it).
  function csv(path, name) {
    return fetch(path, { headers: { Authorization: 'Bearer ' + state.token, Accept: 'text/csv' }, credentials: 'same-origin' })
      .then(function (r) {
        if (!r.ok) {
          return r.text().then(function (t) {
            var m = 'HTTP ' + r.status;
            try { m = JSON.parse(t).error.message || m; } catch (e) { /* not the envelope */ }
            throw new Error(r.status === 404 || r.status === 405 ? 'not available yet on this server' : m);
          });
        }
        return r.blob();
      }).then(function (blob) {
        var url = URL.createObjectURL(blob);
        var a = el('a', { href: url, download: name });
        document.body.appendChild(a);
        a.click();
        a.remove();
        window.setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
        say('Downloaded ' + name + '.');
      }).catch(function (e) { say('The CSV was not downloaded: ' + e.message); });
  }

  // ---- Install

  function snippet() {
    return '<script src="' + location.origin + '/svc.js" data-program-id="' + pid() + '" async></script>';
  }

  function copy(value, what) {
    var done = function () { say(what + ' copied.'); };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      return navigator.clipboard.writeText(value).then(done, function () { say('Select the ' + what.toLowerCase() + ' and copy it: the browser refused.'); });
    }
    say('Select the ' + what.toLowerCase() + ' and copy it: this browser has no clipboard access.');
    return Promise.resolve();
  }

  function loadSettings() {
    // The answer is kept only if its program is still the one picked: a
    // slower answer for the program shown before (a reload, then a pick)
    // must not stand in for the new one's settings.
    var asked = pid();
    return api(programBase() + '/settings').then(function (b) {
      if (pid() === asked) state.settings = (b && b.data) || {};
      return state.settings;
    });
  }

  function renderOrigins() {
    var box = $('origins');
    box.textContent = '';
    var origins = (state.settings && state.settings.allowed_origins) || [];
    if (origins.length === 0) {
      box.appendChild(el('li', { className: 'empty', text: 'No origin yet: browser clicks and leads are refused until you add your site\'s.' }));
    }
    origins.forEach(function (o) {
      var li = el('li', {}, [el('span', { className: 'mono', text: o })]);
      if (canWrite()) {
        li.appendChild(button('Remove', 'link-button', function () {
          return saveOrigins(origins.filter(function (x) { return x !== o; }), 'Removed ' + o + ' from the allowed origins.');
        }, { 'aria-label': 'Remove ' + o }));
      }
      box.appendChild(li);
    });
  }

  function saveOrigins(origins, msg) {
    return api(programBase() + '/settings', { method: 'PATCH', body: { allowed_origins: origins } }).then(function (b) {
      state.settings = (b && b.data) || state.settings;
      renderOrigins();
      say(msg);
      return true;
    }).catch(fail('The origins were not saved'));
  }

  function loadKeys() {
    var box = $('keys');
    var asked = pid();
    return api(programBase() + '/keys').then(function (b) {
      if (pid() !== asked) return; // another program's list: its own call draws the picked one
      grid(box, [
        ['Key', function (k) { return el('span', { className: 'mono', text: k.masked || '' }); }],
        ['Mode', function (k) { return text(k.mode); }],
        ['Created', function (k) { return when(k.created_at); }],
        ['Last used', function (k) { return k.last_used_at ? when(k.last_used_at) : 'Never'; }],
        ['Rotation', function (k) { return k.rotation ? 'Stops working ' + when(k.rotation.deadline) : '\u2014'; }],
        ['', function (k) { return canWrite() ? keyActions(k) : ''; }, 'actions-cell']
      ], list(b), 'No key yet. Create one for your server.', 'key');
    }).catch(function (e) { problem(box, e); });
  }

  function keyActions(k) {
    var wrap = el('div', { className: 'row-actions' });
    var form = el('form', { className: 'mini-form', hidden: 'hidden' });
    var id = 'rotate-' + k.id;
    var input = el('input', { id: id, type: 'date', required: 'required' });
    form.appendChild(el('label', { for: id, text: 'Stop it on' }));
    form.appendChild(input);
    form.appendChild(el('button', { type: 'submit', text: 'Mark for rotation' }));
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      if (!input.value) { say('Pick the day the key stops working.'); return; }
      api(programBase() + '/keys/' + k.id + '/rotation', { method: 'POST', body: { deadline: input.value + 'T00:00:00Z' } }).then(function () {
        say('Key ' + k.masked + ' is marked for rotation: it stops working on ' + input.value + '.');
        return loadKeys();
      }).catch(fail('The key was not marked'));
    });
    wrap.appendChild(button('Rotate', 'secondary', function () { form.hidden = !form.hidden; if (!form.hidden) input.focus(); },
      { 'aria-label': 'Rotate ' + k.masked }));
    wrap.appendChild(button('Revoke', 'danger', function () {
      if (!window.confirm('Revoke ' + k.masked + '? Requests with it are refused at once.')) return;
      return api(programBase() + '/keys/' + k.id, { method: 'DELETE' }).then(function () {
        say('Key ' + k.masked + ' is revoked.');
        return loadKeys();
      }).catch(fail('The key was not revoked'));
    }, { 'aria-label': 'Revoke ' + k.masked }));
    wrap.appendChild(form);
    return wrap;
  }

  function fact(dl, term, value, testid) {
    dl.appendChild(el('dt', { text: term }));
    dl.appendChild(el('dd', { text: value, 'data-testid': testid }));
  }

  // checkInstall shows the latest test click and lead the status route
  // saw (what the spec's checklist counts) and the latest real ones
  // (GET /api/tracking/activity/:id), so live traffic shows as it arrives.
  function checkInstall() {
    var dl = $('check-result');
    return Promise.all([
      api('/api/tracking/status/' + encodeURIComponent(pid())),
      api('/api/tracking/activity/' + encodeURIComponent(pid()))
    ]).then(function (got) {
      var st = (got[0] && got[0].data && got[0].data.statistics) || {};
      var live = (got[1] && got[1].data) || {};
      var pv = st.pageview || {}, rf = st.referrals || {};
      dl.textContent = '';
      var latest = function (x) { return x && (x.timestamp || x.createdAt); };
      fact(dl, 'Last test click', pv.latestTestEvent ? when(latest(pv.latestTestEvent)) : 'None seen yet', 'check-test-click');
      fact(dl, 'Test clicks seen', String(pv.testEventCount || 0), 'check-test-clicks');
      fact(dl, 'Last test lead', rf.latestTestEvent ? when(latest(rf.latestTestEvent)) : 'None seen yet', 'check-test-lead');
      fact(dl, 'Last real click', live.latestClick ? when(live.latestClick.timestamp) : 'None seen yet', 'check-real-click');
      fact(dl, 'Last real lead', live.latestLead ? when(live.latestLead.timestamp) : 'None seen yet', 'check-real-lead');
      say(pv.latestTestEvent || live.latestClick ? 'Your tracker is sending clicks.' : 'No click seen yet: open your site with a test referral link.');
    }).catch(fail('The installation was not checked'));
  }

  function showInstall() {
    $('snippet').textContent = snippet();
    $('origin-input').value = '';
    $('new-key').hidden = true;
    var origins = loadSettings().then(renderOrigins).catch(function (e) {
      $('origins').textContent = '';
      $('origins').appendChild(el('li', { className: 'empty', text: 'Could not load: ' + e.message }));
    });
    return Promise.all([origins, loadKeys()]);
  }

  // ---- Partners

  var partnerPager = new Pager('partner-pager', function (cursor) {
    var box = $('partner-list');
    return api(withCursor(programBase() + '/partners', cursor)).then(function (b) {
      grid(box, [
        ['Partner', function (p) { return el('span', {}, [el('strong', { text: text(p.name) }), el('small', { className: 'sub', text: p.email || '' })]); }, 'name'],
        ['Status', function (p) { return el('span', { className: 'badge ' + (p.status || ''), text: text(p.status) }); }],
        ['Links', function (p) { return linksCell(p); }],
        ['Clicks', function (p) { return p.clicks === null ? '\u2014' : fmt('int', p.clicks); }, 'num'],
        ['Leads', function (p) { return p.leads === null ? '\u2014' : fmt('int', p.leads); }, 'num'],
        ['Conversions', function (p) { return p.conversions === null ? '\u2014' : fmt('int', p.conversions); }, 'num'],
        ['Revenue', function (p) { return partnerMoney(p, 'revenue'); }, 'num'],
        ['Commission', function (p) { return partnerMoney(p, 'commission'); }, 'num'],
        ['', function (p) { return canWrite() ? partnerActions(p) : ''; }, 'actions-cell']
      ], list(b), 'No partner yet. Invite your first one below.', 'partner');
      return b;
    }).catch(function (e) { problem(box, e); throw e; });
  });

  // partnerMoney shows a partner's money of the figures' window, each
  // currency in its own units (the list never converts); a dash when the
  // figures are unavailable.
  function partnerMoney(p, key) {
    if (Array.isArray(p.money)) {
      if (!p.money.length) return money(0, 'USD');
      return p.money.map(function (m) { return money(m[key], m.currency); }).join(' + ');
    }
    if (p.money === null && p[key] === undefined) return '\u2014';
    return money(p[key], p.currency);
  }

  function linksCell(p) {
    var ul = el('ul', { className: 'links' });
    (p.links || []).forEach(function (l) {
      var li = el('li', {}, [el('span', { className: 'mono' + (l.active ? '' : ' off'), text: l.code || ('#' + l.id) }),
        el('span', { className: 'sub', text: l.active ? ' on' : ' off' })]);
      if (canWrite()) {
        li.appendChild(button(l.active ? 'Disable' : 'Enable', 'link-button', function () {
          return api(programBase() + '/links/' + encodeURIComponent(l.id), { method: 'PATCH', body: { active: !l.active } }).then(function () {
            say('Link ' + l.code + (l.active ? ' is disabled: its clicks are refused.' : ' is enabled again.'));
            return partnerPager.load();
          }).catch(fail('The link was not changed'));
        }, { 'aria-label': (l.active ? 'Disable link ' : 'Enable link ') + l.code, 'data-testid': 'link-toggle-' + l.code }));
      }
      ul.appendChild(li);
    });
    if ((p.links || []).length === 0) ul.appendChild(el('li', { className: 'sub', text: 'No link' }));
    return ul;
  }

  function partnerActions(p) {
    var wrap = el('div', { className: 'row-actions' });
    var post = function (what, path, body, msg) {
      return api(programBase() + '/partners/' + encodeURIComponent(p.id) + path, { method: 'POST', body: body }).then(function () {
        say(msg);
        return partnerPager.load();
      }).catch(fail(what));
    };
    if (p.status !== 'approved') {
      wrap.appendChild(button('Approve', 'secondary', function () { return post('The partner was not approved', '/approve', undefined, (p.name || p.email) + ' is approved.'); },
        { 'aria-label': 'Approve ' + (p.name || p.email) }));
    }
    if (p.status !== 'rejected') {
      wrap.appendChild(button('Reject', 'danger', function () { return post('The partner was not rejected', '/reject', undefined, (p.name || p.email) + ' is rejected; their links are off.'); },
        { 'aria-label': 'Reject ' + (p.name || p.email) }));
    }
    if (p.status === 'approved') {
      wrap.appendChild(button('Add link', 'secondary', function () { return post('The link was not added', '/links', {}, 'A new link for ' + (p.name || p.email) + ' is on.'); },
        { 'aria-label': 'Add link for ' + (p.name || p.email) }));
    }
    return wrap;
  }

  // ---- Commissions

  function commissionFilters() {
    var q = {};
    [['cf-status', 'status'], ['cf-partner', 'partner_id'], ['cf-from', 'from'], ['cf-to', 'to']].forEach(function (f) {
      var v = $(f[0]).value.trim();
      if (v) q[f[1]] = v;
    });
    return q;
  }

  var commissionPager = new Pager('commission-pager', function (cursor) {
    var box = $('commission-list');
    return api(withCursor(programBase() + '/commissions', cursor, commissionFilters())).then(function (b) {
      grid(box, [
        ['Created', function (c) { return when(c.created_at); }],
        ['Partner', function (c) { return text(c.partner_name || c.partner_id); }],
        ['Kind', function (c) { return text(c.kind); }],
        ['Status', function (c) { return el('span', { className: 'badge ' + (c.status || ''), text: text(c.status) }); }],
        ['Amount', function (c) { return money(c.amount, c.currency); }, 'num'],
        ['Sale', function (c) { return el('span', { className: 'mono', text: text(c.transaction_id || c.sale_id) }); }],
        ['Customer click', function (c) { return el('span', { className: 'mono', text: text(c.customer_click_id) }); }]
      ], list(b), 'No commission matches.', 'commission');
      return b;
    }).catch(function (e) { problem(box, e); throw e; });
  });

  // ---- Payouts
  //
  // One answer pages two lists: data.balances (each partner's money here,
  // by balances_cursor) and data.payouts (newest first, by cursor). Each
  // list has its own pager and asks for its own page.

  var balancePager = new Pager('balance-pager', function (cursor) {
    var box = $('balance-list');
    return api(withCursor(programBase() + '/payouts', cursor, {}, 'balances_cursor')).then(function (b) {
      grid(box, [
        ['Partner', function (r) { return partnerName(r.partner_id); }, 'name'],
        ['Currency', function (r) { return text(r.currency); }],
        ['Earned', function (r) { return money(r.earned, r.currency); }, 'num'],
        ['Paid', function (r) { return money(r.paid, r.currency); }, 'num'],
        ['Balance', function (r) { return money(r.balance, r.currency); }, 'num'],
        ['Open payouts', function (r) { return money(r.open_payouts, r.currency); }, 'num'],
        ['Available', function (r) { return money(r.available, r.currency); }, 'num'],
        ['', function (r) { return canWrite() && r.available > 0 ? payoutForm(r) : ''; }, 'actions-cell']
      ], (b && b.data && b.data.balances) || [], 'No partner has earned money in this program yet.', 'balance');
      return b;
    }).catch(function (e) { problem(box, e); throw e; });
  }, function (b) { return (b && b.balances_next_cursor) || ''; });

  var payoutPager = new Pager('payout-pager', function (cursor) {
    var box = $('payout-list');
    return api(withCursor(programBase() + '/payouts', cursor)).then(function (b) {
      grid(box, [
        ['Opened', function (p) { return when(p.created_at); }],
        ['Partner', function (p) { return partnerName(p.partner_id); }, 'name'],
        ['Amount', function (p) { return money(p.amount, p.currency); }, 'num'],
        ['Status', function (p) { return el('span', { className: 'badge ' + (p.status || ''), text: text(p.status) }); }],
        ['Reference', function (p) { return el('span', { className: 'mono', text: text(p.reference) }); }],
        ['', function (p) { return canWrite() && p.status === 'open' ? payoutActions(p) : ''; }, 'actions-cell']
      ], (b && b.data && b.data.payouts) || [], 'No payout yet.', 'payout');
      return b;
    }).catch(function (e) { problem(box, e); throw e; });
  });

  // partnerName shows a partner by id: the API's money rows carry ids only.
  function partnerName(id) { return 'Partner #' + text(id); }

  function reloadPayouts() { return Promise.all([balancePager.load(), payoutPager.load()]); }

  function payoutActions(p) {
    var wrap = el('div', { className: 'row-actions' });
    wrap.appendChild(button('Mark paid', 'secondary', function () {
      var ref = window.prompt('Reference of the transfer (optional)', '') || '';
      return api(programBase() + '/payouts/' + encodeURIComponent(p.id) + '/pay', { method: 'POST', body: ref ? { reference: ref } : {} }).then(function () {
        say('Payout of ' + money(p.amount, p.currency) + ' is marked paid.');
        return reloadPayouts();
      }).catch(fail('The payout was not marked paid'));
    }, { 'aria-label': 'Mark paid: payout ' + p.id }));
    wrap.appendChild(button('Cancel', 'danger', function () {
      return api(programBase() + '/payouts/' + encodeURIComponent(p.id) + '/cancel', { method: 'POST' }).then(function () {
        say('Payout ' + p.id + ' is canceled; its amount is available again.');
        return reloadPayouts();
      }).catch(fail('The payout was not canceled'));
    }, { 'aria-label': 'Cancel payout ' + p.id }));
    return wrap;
  }

  function payoutForm(r) {
    var form = el('form', { className: 'mini-form' });
    var id = 'payout-amount-' + r.partner_id + '-' + r.currency;
    var input = el('input', { id: id, inputmode: 'decimal', placeholder: 'All available', autocomplete: 'off' });
    form.appendChild(el('label', { for: id, text: 'Amount' }));
    form.appendChild(input);
    form.appendChild(el('button', { type: 'submit', text: 'Open payout' }));
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      var body = { partner_id: r.partner_id, currency: r.currency };
      if (input.value.trim()) {
        var digits = new Intl.NumberFormat('en-US', { style: 'currency', currency: r.currency || 'USD' }).resolvedOptions().maximumFractionDigits;
        var n = Number(input.value.trim());
        if (!(n > 0)) { say('The amount must be a positive number.'); return; }
        body.amount = Math.round(n * Math.pow(10, digits));
      }
      api(programBase() + '/payouts', { method: 'POST', body: body }).then(function () {
        say('A payout for ' + partnerName(r.partner_id) + ' is open.');
        return Promise.all([balancePager.load(), payoutPager.reset()]);
      }).catch(fail('The payout was not opened'));
    });
    return form;
  }

  // ---- Webhooks
  //
  // The program's endpoints and each one's delivery log. A signing secret
  // is in an answer only when an endpoint is created or its secret is
  // rotated: the page shows it then and empties the box whenever the page
  // is shown again, so it is seen once.

  var WEBHOOK_FIELDS = { url: 'webhook-url', description: 'webhook-description', events: 'webhook-ev-lead-created', include_test: 'webhook-include-test' };

  function webhookBase(id) { return programBase() + '/webhooks' + (id === undefined ? '' : '/' + encodeURIComponent(id)); }

  // failing: disabled by svc after 5 days of failed deliveries (not by a
  // member), which the page warns about.
  function failing(w) { return !w.enabled && w.disabled_reason === 'failing'; }

  function sameWebhook(a, b) { return !!(a && b) && String(a.id) === String(b.id); }

  // loadWebhooks lists the program's endpoints: one answer, no paging (a
  // program has at most 20) and no query (the route takes none).
  function loadWebhooks() {
    var box = $('webhook-list');
    var p = pid();
    return api(webhookBase()).then(function (b) {
      var rows = list(b);
      noteFailing(p, rows);
      renderWebhookWarnings(rows);
      grid(box, [
        ['Endpoint', function (w) { return el('span', {}, [el('span', { className: 'mono', text: text(w.url) }), el('small', { className: 'sub', text: w.description || '' })]); }, 'name'],
        ['Events', function (w) { return (w.events || []).join(', ') || '\u2014'; }, 'name'],
        ['Test events', function (w) { return w.include_test ? 'Sent' : 'Not sent'; }],
        ['State', function (w) {
          return el('span', { className: 'badge ' + (w.enabled ? 'enabled' : 'disabled'), text: w.enabled ? 'enabled' : failing(w) ? 'disabled: failing' : 'disabled' });
        }],
        ['Created', function (w) { return when(w.created_at); }],
        ['', function (w) { return webhookActions(w); }, 'actions-cell']
      ], rows, 'No endpoint yet.' + (canWrite() ? ' Add one below to receive events.' : ''), 'webhook');
      // The log stays on the endpoint it shows (its row refreshed), or
      // opens the first one.
      var kept = rows.filter(function (w) { return sameWebhook(w, state.webhook); })[0];
      if (kept) {
        state.webhook = kept;
        $('deliveries-endpoint').textContent = kept.url;
      } else if (!state.webhook && rows.length) {
        openLog(rows[0], false);
      }
      return b;
    }).catch(function (e) {
      $('webhook-warnings').textContent = '';
      problem(box, e);
      throw e;
    });
  }

  function renderWebhookWarnings(rows) {
    var box = $('webhook-warnings');
    box.textContent = '';
    rows.filter(failing).forEach(function (w) {
      var note = el('div', { className: 'warning', 'data-testid': 'webhook-disabled-' + w.id }, [
        el('p', {}, [
          el('strong', { text: 'Disabled: ' }),
          el('span', { className: 'mono', text: w.url }),
          document.createTextNode(' was disabled' + (w.disabled_at ? ' on ' + when(w.disabled_at) : '') +
            ' after 5 days of failed deliveries. Events are not sent to it while it is disabled: fix your receiver, then re-enable it.')
        ])
      ]);
      if (canWrite()) note.appendChild(button('Re-enable', 'primary', function () { return setEnabled(w, true); }, { 'aria-label': 'Re-enable ' + w.url }));
      box.appendChild(note);
    });
  }

  // The banner every page but Webhooks shows while an endpoint of the
  // program is disabled as failing: the endpoint list is the source (the
  // notifications route says what happened, the list whether it still
  // holds). One list answer serves a minute of page changes, since the
  // webhook routes share a small per-session rate limit; the Webhooks page
  // refreshes it with every list it loads (a re-enable clears the banner).
  var BANNER_TTL_MS = 60000;

  function noteFailing(p, rows) {
    state.hookAlert = { pid: p, at: Date.now(), failing: rows.filter(failing).length };
    renderWebhookBanner();
  }

  function webhookBanner() {
    var p = pid();
    var known = state.hookAlert;
    if (!p || state.created[p] || state.route === 'webhooks' || state.route === 'create' ||
      (known && known.pid === p && Date.now() - known.at < BANNER_TTL_MS)) {
      renderWebhookBanner();
      return Promise.resolve();
    }
    // A program whose list cannot be read (a route not live, a refusal)
    // has no banner; it is asked again after the minute.
    return api(webhookBase()).then(function (b) { noteFailing(p, list(b)); }, function () { noteFailing(p, []); });
  }

  function renderWebhookBanner() {
    var known = state.hookAlert;
    var n = known && known.pid === pid() && state.route !== 'webhooks' && state.route !== 'create' ? known.failing : 0;
    var box = $('webhook-banner');
    if (!n) { box.hidden = true; return; }
    var msg = n === 1 ? 'A webhook endpoint was disabled after 5 days of failed deliveries.'
      : n + ' webhook endpoints were disabled after 5 days of failed deliveries.';
    // Written only when it changes: the banner is a live region, and
    // moving between pages must not announce it again.
    if ($('webhook-banner-text').textContent !== msg) {
      $('webhook-banner-text').textContent = msg;
      $('webhook-banner-link').textContent = n === 1 ? 'Review it on the Webhooks page' : 'Review them on the Webhooks page';
    }
    box.hidden = false;
  }

  // The notifications: what svc told the program, newest first, paged.
  var notificationPager = new Pager('notification-pager', function (cursor) {
    var box = $('notification-list');
    return api(withCursor(webhookBase() + '/notifications', cursor)).then(function (b) {
      grid(box, [
        ['Date', function (n) { return when(n.created_at); }],
        ['Endpoint', function (n) { return n.url ? el('span', { className: 'mono', text: n.url }) : 'Deleted endpoint #' + n.endpoint_id; }, 'name'],
        ['What happened', function (n) { return n.kind === 'endpoint_disabled' ? 'Disabled after 5 days of failed deliveries' : text(n.kind); }, 'name']
      ], list(b), 'Nothing yet. If an endpoint fails every delivery for 5 days, svc disables it and says so here.', 'notification');
      return b;
    }).catch(function (e) { problem(box, e); throw e; });
  });

  function webhookActions(w) {
    var wrap = el('div', { className: 'row-actions' });
    wrap.appendChild(button('Delivery log', 'secondary', function () { return openLog(w, true); }, { 'aria-label': 'Delivery log of ' + w.url }));
    if (!canWrite()) return wrap;
    wrap.appendChild(button('Send test', 'secondary', function () {
      return api(webhookBase(w.id) + '/test', { method: 'POST' }).then(function (b) {
        var d = (b && b.data) || {};
        say('A ping' + (d.event_id ? ' (' + d.event_id + ')' : '') + ' is on its way to ' + w.url + ': its delivery is in the log.');
        return openLog(w, false);
      }).catch(fail('The ping was not sent'));
    }, { 'aria-label': 'Send test to ' + w.url }));
    wrap.appendChild(button('Edit', 'secondary', function () { startEdit(w); }, { 'aria-label': 'Edit ' + w.url }));
    wrap.appendChild(button('Rotate secret', 'secondary', function () {
      if (!window.confirm('Rotate the signing secret of ' + w.url + '? The old secret keeps signing beside the new one for 24 hours.')) return;
      return api(webhookBase(w.id) + '/secret', { method: 'POST' }).then(function (b) {
        showSecret(w.url, b && b.data && b.data.secret, true);
        say('The secret of ' + w.url + ' is rotated: copy the new one now, you will not see it again. The old one keeps signing for 24 hours.');
      }).catch(fail('The secret was not rotated'));
    }, { 'aria-label': 'Rotate secret of ' + w.url }));
    if (w.enabled) {
      wrap.appendChild(button('Disable', 'secondary', function () { return setEnabled(w, false); }, { 'aria-label': 'Disable ' + w.url }));
    } else {
      wrap.appendChild(button('Enable', 'secondary', function () { return setEnabled(w, true); }, { 'aria-label': 'Enable ' + w.url }));
    }
    wrap.appendChild(button('Delete', 'danger', function () {
      if (!window.confirm('Delete the endpoint ' + w.url + '? No event goes to it any more, and its delivery log goes with it.')) return;
      return api(webhookBase(w.id), { method: 'DELETE' }).then(function () {
        if (sameWebhook(w, state.webhook)) { state.webhook = null; $('deliveries-card').hidden = true; }
        if (sameWebhook(w, state.editing)) endEdit();
        say(w.url + ' is deleted: no event goes to it any more.');
        return loadWebhooks();
      }).catch(fail('The endpoint was not deleted'));
    }, { 'aria-label': 'Delete ' + w.url }));
    return wrap;
  }

  function setEnabled(w, on) {
    return api(webhookBase(w.id), { method: 'PATCH', body: { enabled: on } }).then(function () {
      say(w.url + (on ? ' is enabled again: new events go to it.' : ' is disabled: no event goes to it until you enable it.'));
      return loadWebhooks();
    }).catch(fail(on ? 'The endpoint was not enabled' : 'The endpoint was not disabled'));
  }

  function showSecret(url, secret, rotated) {
    $('new-secret-title').textContent = (rotated ? 'The new signing secret of ' : 'The signing secret of ') + url + '.';
    $('new-secret-value').textContent = secret || '';
    $('new-secret-rotated').hidden = !rotated;
    $('new-secret').hidden = false;
    $('new-secret').scrollIntoView({ block: 'nearest' });
  }

  function hideSecret() {
    $('new-secret-value').textContent = '';
    $('new-secret').hidden = true;
  }

  function webhookFormBody() {
    var events = Array.prototype.filter.call(document.querySelectorAll('#webhook-events input[name=events]'), function (c) { return c.checked; })
      .map(function (c) { return c.value; });
    var body = { url: $('webhook-url').value.trim(), events: events };
    var d = $('webhook-description').value.trim();
    // Editing sends it even when emptied, so it can be cleared.
    if (d || state.editing) body.description = d;
    body.include_test = $('webhook-include-test').checked;
    return body;
  }

  function clearFieldErrors() {
    Object.keys(WEBHOOK_FIELDS).forEach(function (f) {
      var box = $('webhook-' + f + '-error');
      box.textContent = '';
      box.hidden = true;
      $(WEBHOOK_FIELDS[f]).removeAttribute('aria-invalid');
    });
  }

  // fieldError says a refusal beside the field error.details.field names
  // ("events[2]" is the events field); false when it names none of the form's.
  function fieldError(e) {
    var f = String(e.field || '').split(/[.[]/)[0];
    if (!WEBHOOK_FIELDS[f]) return false;
    var box = $('webhook-' + f + '-error');
    box.textContent = e.message;
    box.hidden = false;
    if (f !== 'events') $(WEBHOOK_FIELDS[f]).setAttribute('aria-invalid', 'true');
    $(WEBHOOK_FIELDS[f]).focus();
    return true;
  }

  function startEdit(w) {
    state.editing = w;
    clearFieldErrors();
    $('webhook-url').value = w.url || '';
    $('webhook-description').value = w.description || '';
    Array.prototype.forEach.call(document.querySelectorAll('#webhook-events input[name=events]'), function (c) {
      c.checked = (w.events || []).indexOf(c.value) >= 0;
    });
    $('webhook-include-test').checked = !!w.include_test;
    $('webhook-form-title').textContent = 'Edit ' + w.url;
    $('webhook-submit').textContent = 'Save endpoint';
    $('webhook-cancel').hidden = false;
    $('webhook-url').focus();
  }

  function endEdit() {
    state.editing = null;
    $('webhook-form').reset();
    clearFieldErrors();
    $('webhook-form-title').textContent = 'Add an endpoint';
    $('webhook-submit').textContent = 'Add endpoint';
    $('webhook-cancel').hidden = true;
  }

  function openLog(w, focus) {
    state.webhook = w;
    $('deliveries-card').hidden = false;
    $('deliveries-endpoint').textContent = w.url;
    if (focus) $('deliveries-card').scrollIntoView({ block: 'start' });
    return deliveryPager.reset().catch(function () {});
  }

  var deliveryPager = new Pager('delivery-pager', function (cursor) {
    var box = $('delivery-list');
    var w = state.webhook;
    if (!w) return Promise.resolve(null);
    var status = $('df-status').value;
    return api(withCursor(webhookBase(w.id) + '/deliveries', cursor, status ? { status: status } : {})).then(function (b) {
      if (!sameWebhook(w, state.webhook)) return b;
      grid(box, [
        ['Created', function (d) { return when(d.created_at); }],
        ['Event', function (d) { return el('span', {}, [el('span', { text: text(d.event_type) }), el('small', { className: 'sub mono', text: d.event_id || '' })]); }, 'name'],
        ['Status', function (d) { return el('span', { className: 'badge ' + (d.status || ''), text: text(d.status) }); }],
        ['Attempts', function (d) { return fmt('int', d.attempts); }, 'num'],
        ['Response', function (d) {
          var got = d.last_status ? 'HTTP ' + d.last_status : '';
          if (!d.last_error) return got || '\u2014';
          return el('span', {}, [document.createTextNode(got), el('small', { className: 'sub', text: d.last_error })]);
        }, 'name'],
        ['Duration', function (d) { return d.last_duration_ms === null || d.last_duration_ms === undefined ? '\u2014' : fmt('int', d.last_duration_ms) + ' ms'; }, 'num'],
        ['Last attempt', function (d) { return when(d.last_attempt_at); }],
        ['Next', function (d) {
          if (d.status === 'delivered') return 'Delivered ' + when(d.delivered_at);
          if (d.status === 'failed') return 'Not retried any more';
          return d.next_attempt_at ? when(d.next_attempt_at) : 'Soon';
        }],
        ['', function (d) { return canWrite() && (d.status !== 'pending' || d.attempts > 0) ? retryButton(w, d) : ''; }, 'actions-cell']
      ], list(b), status ? 'No ' + status + ' delivery.' : 'No delivery yet. Send a test ping to see one here.', 'delivery');
      return b;
    }).catch(function (e) { problem(box, e); throw e; });
  });

  // retryButton makes a delivery due now: a failed or waiting one is
  // retried, a delivered one sent again (a receiver that lost it).
  function retryButton(w, d) {
    var again = d.status === 'delivered';
    return button(again ? 'Send again' : 'Retry', 'secondary', function () {
      return api(webhookBase(w.id) + '/deliveries/' + encodeURIComponent(d.id) + '/retry', { method: 'POST' }).then(function () {
        say('The delivery of ' + d.event_type + ' ' + (d.event_id || '') + ' is queued to be sent again.');
        return deliveryPager.load();
      }).catch(fail('The delivery was not retried'));
    }, { 'aria-label': (again ? 'Send again: delivery ' : 'Retry delivery ') + d.id });
  }

  function showWebhooks() {
    hideSecret();
    endEdit();
    state.webhook = null;
    $('deliveries-card').hidden = true;
    $('df-status').value = '';
    return Promise.all([loadWebhooks().catch(function () {}), notificationPager.reset().catch(function () {})]);
  }

  function wireWebhooks() {
    $('webhook-url').placeholder = 'https://example.com/webhooks/svc';
    $('copy-secret').addEventListener('click', function () { copy($('new-secret-value').textContent, 'Secret'); });
    $('webhook-cancel').addEventListener('click', endEdit);
    $('delivery-filters').addEventListener('submit', function (e) { e.preventDefault(); deliveryPager.reset().catch(function () {}); });
    $('webhook-form').addEventListener('submit', function (e) {
      e.preventDefault();
      clearFieldErrors();
      var body = webhookFormBody();
      var editing = state.editing;
      var sent = editing ? api(webhookBase(editing.id), { method: 'PATCH', body: body }) : api(webhookBase(), { method: 'POST', body: body });
      sent.then(function (b) {
        var w = (b && b.data) || {};
        endEdit();
        if (editing) {
          say((w.url || body.url) + ' is saved.');
        } else {
          showSecret(w.url || body.url, w.secret, false);
          say('The endpoint ' + (w.url || body.url) + ' is added. Copy its signing secret now: you will not see it again.');
        }
        return loadWebhooks().catch(function () {});
      }).catch(function (err) {
        fieldError(err);
        say((editing ? 'The endpoint was not saved: ' : 'The endpoint was not added: ') + err.message);
      });
    });
  }

  // ---- Settings

  function renderSettingsForm() {
    var s = state.settings || {};
    $('set-lead').value = s.lead_auth_policy || 'server_required';
    $('set-window').value = s.attribution_window_days || '';
    $('set-payments').value = s.payment_tracking_mode || 'processor_connect';
  }

  function loadProcessor() {
    var dl = $('processor-status');
    return api('/api/tracking/status/' + encodeURIComponent(pid())).then(function (b) {
      var pay = (b && b.data && b.data.statistics && b.data.statistics.payments) || {};
      dl.textContent = '';
      var yes = function (v) { return v ? 'Yes' : 'No'; };
      fact(dl, 'Payments reported by', pay.paymentTrackingMode === 's2s' ? 'Your server' : 'The payment processor', 'pay-mode');
      fact(dl, 'Processor', pay.isProcessorConnected ? 'Connected' : (pay.processorConnectionStatus || 'Not connected'), 'pay-connected');
      if (pay.isProcessorConnected) {
        fact(dl, 'Account', text(pay.processorAccountId), 'pay-account');
        fact(dl, 'Charges enabled', yes(pay.chargesEnabled), 'pay-charges');
        fact(dl, 'Payouts enabled', yes(pay.payoutsEnabled), 'pay-payouts');
        fact(dl, 'Details submitted', yes(pay.detailsSubmitted), 'pay-details');
        fact(dl, 'Connected on', when(pay.connectionDate), 'pay-date');
      }
      $('processor-connect').textContent = pay.isProcessorConnected ? 'Reconnect payment processor' : 'Connect payment processor';
      $('processor-disconnect').hidden = !pay.isProcessorConnected;
    }).catch(function (e) {
      dl.textContent = '';
      fact(dl, 'Processor', 'Could not load: ' + e.message, 'pay-connected');
    });
  }

  var memberPager = new Pager('member-pager', function (cursor) {
    var box = $('member-list');
    return api(withCursor(programBase() + '/members', cursor)).then(function (b) {
      grid(box, [
        ['Member', function (m) { return el('span', {}, [el('strong', { text: m.name || m.email }), el('small', { className: 'sub', text: m.name ? m.email : '' })]); }, 'name'],
        ['May', function (m) { return !m.active ? 'Removed' : (m.permissions || []).indexOf('tracking:write') >= 0 ? 'Read and change' : 'Read'; }],
        ['', function (m) {
          if (!canWrite() || !m.active) return '';
          return button('Remove', 'danger', function () {
            if (!window.confirm('Remove ' + m.email + ' from the team?')) return;
            return api(programBase() + '/members/' + encodeURIComponent(m.user_id), { method: 'DELETE' }).then(function () {
              say(m.email + ' is no longer on the team.');
              return memberPager.load();
            }).catch(fail('The member was not removed'));
          }, { 'aria-label': 'Remove ' + m.email });
        }, 'actions-cell']
      ], list(b).filter(function (m) { return m.active !== false; }), 'No member.', 'member');
      return b;
    }).catch(function (e) { problem(box, e); throw e; });
  });

  function showSettings() {
    var s = loadSettings().then(renderSettingsForm).catch(function (e) { say('The settings could not be loaded: ' + e.message); });
    return Promise.all([s, loadProcessor(), memberPager.reset().catch(function () {})]);
  }

  // ---- Router

  function routeFromHash() {
    // #settings, and also #settings?… or #settings&… (a return address
    // that carries more after the page's name).
    var h = location.hash.replace(/^#/, '').split(/[?&/]/)[0];
    return ROUTES.indexOf(h) >= 0 ? h : 'overview';
  }

  // applyAccess hides what a reader cannot use (and disables the settings
  // fields), so the pages read the same and nothing offers a change the
  // routes would refuse.
  function applyAccess() {
    var w = canWrite();
    document.body.classList.toggle('readonly', !w);
    $('readonly-note').hidden = w || state.programs.length === 0;
    Array.prototype.forEach.call(document.querySelectorAll('#settings-form select, #settings-form input'), function (f) { f.disabled = !w; });
    // No program yet: no pages to go to, nothing to pick.
    document.querySelector('.tabs').hidden = state.programs.length === 0;
    $('program').parentElement.hidden = state.programs.length === 0;
    // Creating a program needs a workspace of one's own, not this
    // program's permission.
    var own = ownWorkspaces();
    $('new-program').hidden = own.length === 0;
    $('create-form').hidden = own.length === 0;
    $('create-none').hidden = own.length > 0;
    $('create-workspace-field').hidden = own.length < 2;
    var ws = $('create-workspace');
    if (ws.options.length !== own.length) {
      ws.textContent = '';
      own.forEach(function (w) { ws.appendChild(el('option', { value: String(w.id), text: w.name || ('#' + w.id) })); });
    }
  }

  // show renders the route's page; moving between pages moves focus to
  // the page's heading area (so keyboard and screen reader users land there).
  function show(route, focus) {
    state.route = route;
    ROUTES.forEach(function (r) { $('page-' + r).hidden = r !== route; });
    Array.prototype.forEach.call(document.querySelectorAll('.tabs a'), function (a) {
      if (a.getAttribute('data-route') === route) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    });
    document.title = (route === 'create' ? 'Create program' : route.charAt(0).toUpperCase() + route.slice(1)) + ' \u2014 svc dashboard';
    // What the last change said belongs to the page it was made on; a
    // change that moved here itself (a program created) keeps its words.
    if (!state.keepSay) $('status').textContent = '';
    state.keepSay = false;
    if (focus) $('content').focus({ preventScroll: false });
    applyAccess();
    renderWebhookBanner();
    if (!pid() && route !== 'create') return Promise.resolve();
    var done;
    switch (route) {
      case 'overview': done = load(); break;
      case 'install': done = showInstall(); break;
      case 'partners': done = partnerPager.reset().catch(function () {}); break;
      case 'commissions': done = commissionPager.reset().catch(function () {}); break;
      case 'payouts': done = Promise.all([balancePager.reset(), payoutPager.reset()]).catch(function () {}); break;
      case 'webhooks': done = showWebhooks(); break;
      case 'settings': done = showSettings(); break;
      default: done = Promise.resolve(); $('create-name').focus();
    }
    var shown = pid();
    return Promise.all([done, webhookBanner()]).then(function () {
      // Marked only for what this call loaded, not for a program or page
      // picked while it was loading.
      if (state.route === route && pid() === shown) document.body.setAttribute('data-page', route + ':' + shown);
    });
  }

  function ownWorkspaces() {
    return ((state.me && state.me.workspaces) || []).filter(function (w) { return w.owner; });
  }

  function fillPrograms(want) {
    var sel = $('program');
    sel.textContent = '';
    state.programs.forEach(function (p) { sel.appendChild(el('option', { value: String(p.id), text: p.name + ' (#' + p.id + ')' })); });
    if (want && state.programs.some(function (p) { return String(p.id) === String(want); })) sel.value = String(want);
  }

  function wire() {
    // Set here, not in the page: the page itself names no other origin.
    $('origin-input').placeholder = 'https://shop.example.com';
    $('create-origins').placeholder = 'https://shop.example.com';
    window.addEventListener('hashchange', function () {
      if (/(^|[#&])session=/.test(location.hash)) return;
      show(routeFromHash(), true);
    });
    $('copy-snippet').addEventListener('click', function () { copy($('snippet').textContent, 'Snippet'); });
    $('copy-key').addEventListener('click', function () { copy($('new-key-value').textContent, 'Key'); });
    $('check-install').addEventListener('click', checkInstall);

    $('create-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var origins = $('create-origins').value.split(/\s+/).filter(Boolean);
      var body = { name: $('create-name').value.trim(), domain: $('create-domain').value.trim(),
        commission_type: $('create-type').value, commission_rate: Number($('create-rate').value) };
      if (origins.length) body.allowed_origins = origins;
      // Sent as typed (a number when it is one), so the route's own
      // message names a bad value; left empty, the route's 30 days.
      var hold = $('create-hold').value.trim();
      if (hold) body.hold_days = isNaN(Number(hold)) ? hold : Number(hold);
      if (ownWorkspaces().length > 1) body.advertiser_id = Number($('create-workspace').value);
      api('/api/v1/programs', { method: 'POST', body: body }).then(function (b) {
        var p = (b && b.data) || {};
        p.permissions = p.permissions || ['tracking:read', 'tracking:write'];
        state.programs.push(p);
        // A program this tab just made has no endpoint disabled after 5
        // days of failures, and the webhooks service may not know it yet
        // (its catalog copy follows): its banner is not asked for.
        state.created[p.id] = true;
        fillPrograms(p.id);
        $('create-form').reset();
        showError('');
        say('Program ' + p.name + ' is created. Next: install the tracker.');
        state.keepSay = true;
        location.hash = '#install';
      }).catch(fail('The program was not created'));
    });

    $('origin-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var o = $('origin-input').value.trim().replace(/\/+$/, '');
      if (!o) { say('Type an origin, like https://shop.example.com.'); return; }
      var origins = ((state.settings && state.settings.allowed_origins) || []).slice();
      if (origins.indexOf(o) >= 0) { say(o + ' is already allowed.'); return; }
      origins.push(o);
      saveOrigins(origins, 'Added ' + o + ' to the allowed origins.').then(function (ok) { if (ok) $('origin-input').value = ''; });
    });

    $('key-form').addEventListener('submit', function (e) {
      e.preventDefault();
      api(programBase() + '/keys', { method: 'POST', body: { mode: $('key-mode').value } }).then(function (b) {
        var k = (b && b.data) || {};
        $('new-key-value').textContent = k.key || '';
        $('new-key').hidden = false;
        say('A ' + k.mode + ' key is created. Copy it now: it is never shown again.');
        return loadKeys();
      }).catch(fail('The key was not created'));
    });

    $('invite-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var body = { name: $('invite-name').value.trim(), email: $('invite-email').value.trim() };
      if ($('invite-code').value.trim()) body.code = $('invite-code').value.trim();
      api(programBase() + '/partners', { method: 'POST', body: body }).then(function (b) {
        var d = (b && b.data) || {};
        $('invite-form').reset();
        say((body.name || body.email) + ' is invited' + (d.link && d.link.code ? ', with link ' + d.link.code : '') + '.');
        return partnerPager.reset().catch(function () {});
      }).catch(fail('The partner was not invited'));
    });

    $('commission-filters').addEventListener('submit', function (e) { e.preventDefault(); commissionPager.reset().catch(function () {}); });
    $('commissions-csv').addEventListener('click', function () {
      var q = new URLSearchParams(commissionFilters()).toString();
      return csv(programBase() + '/commissions' + (q ? '?' + q : ''), 'commissions-' + pid() + '.csv');
    });
    $('payouts-csv').addEventListener('click', function () { return csv(programBase() + '/payouts', 'payouts-' + pid() + '.csv'); });

    $('settings-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var body = { lead_auth_policy: $('set-lead').value, payment_tracking_mode: $('set-payments').value };
      if ($('set-window').value) body.attribution_window_days = Number($('set-window').value);
      api(programBase() + '/settings', { method: 'PATCH', body: body }).then(function (b) {
        state.settings = (b && b.data) || state.settings;
        renderSettingsForm();
        say('The settings are saved.');
      }).catch(fail('The settings were not saved'));
    });

    $('processor-connect').addEventListener('click', function () {
      api(programBase() + '/processor/connect', { method: 'POST' }).then(function (b) {
        var url = b && b.data && b.data.url;
        if (!url) throw new Error('no address to go to');
        say('Taking you to the payment processor\u2026');
        location.assign(url);
      }).catch(function (e) { say('The processor was not connected: ' + (e.status === 404 || e.status === 405 ? 'not available yet on this server' : e.message)); });
    });
    $('processor-disconnect').addEventListener('click', function () {
      if (!window.confirm('Disconnect the payment processor? Sales stop being reported until you connect it again.')) return;
      api(programBase() + '/processor', { method: 'DELETE' }).then(function () {
        say('The payment processor is disconnected.');
        return loadProcessor();
      }).catch(fail('The processor was not disconnected'));
    });

    wireWebhooks();

    $('member-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var email = $('member-email').value.trim();
      var perms = $('member-write').checked ? ['tracking:read', 'tracking:write'] : ['tracking:read'];
      api(programBase() + '/members', { method: 'POST', body: { email: email, permissions: perms } }).then(function () {
        $('member-form').reset();
        say(email + ' is on the team' + (perms.length > 1 ? ' and may make changes.' : ' and may read.'));
        return memberPager.reset().catch(function () {});
      }).catch(fail('The member was not added'));
    });
  }

  function start() {
    state.token = takeToken();
    if (!state.token) { showSignIn(); return; }
    api(state.config.programsURL).then(function (body) {
      var d = body.data || {};
      state.me = d;
      state.programs = d.programs || [];
      var user = d.user || {};
      $('who').textContent = user.email || user.name || '';
      $('signin').hidden = true;
      $('app').hidden = false;
      $('signout').hidden = false;
      var want = new URLSearchParams(location.search).get('program');
      fillPrograms(want);
      if (state.programs.length === 0 && ownWorkspaces().length === 0) {
        applyAccess();
        $('page-overview').hidden = true;
        showError('Your account is not a member of any program yet.');
        return;
      }
      if (state.programs.length === 0) {
        say('You have no program yet: create your first one.');
        state.keepSay = true;
        if (location.hash !== '#create') location.hash = '#create'; else show('create', false);
        return;
      }
      show(routeFromHash(), false);
    }).catch(function (e) { showError(e.message); });
  }

  $('period').addEventListener('change', function () {
    var custom = $('period').value === 'custom';
    Array.prototype.forEach.call(document.querySelectorAll('.field.custom'), function (f) { f.hidden = !custom; });
    if (!custom) load();
  });
  offerLocalZone();
  $('timezone').addEventListener('change', load);
  $('program').addEventListener('change', function () {
    if (state.route === 'create') { location.hash = '#overview'; return; }
    show(state.route, false);
  });
  $('dimension').addEventListener('change', load);
  $('controls').addEventListener('submit', function (e) { e.preventDefault(); load(); });
  $('signout').addEventListener('click', signOut);
  wire();
  if (window.ResizeObserver) {
    new ResizeObserver(function () {
      if (state.chart && !$('page-overview').hidden) state.chart.setSize({ width: chartWidth(), height: 300 });
    }).observe($('chart').parentElement);
  }

  fetch('config.json', { credentials: 'same-origin' }).then(function (r) { return r.json(); }).then(function (c) {
    state.config = c;
    start();
  }).catch(function () { showError('The dashboard could not load its configuration.'); });
})();
