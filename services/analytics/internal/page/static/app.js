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
  var state = { config: null, token: '', programs: [], chart: null, seq: 0 };
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
  function api(path) {
    return fetch(path, { headers: { Authorization: 'Bearer ' + state.token, Accept: 'application/json' }, credentials: 'same-origin' })
      .then(function (r) {
        return r.text().then(function (t) {
          var body = null;
          try { body = t ? JSON.parse(t) : null; } catch (e) { body = null; }
          if (r.status === 401) { signOut(); throw new Error('Your session has ended: sign in again.'); }
          if (!r.ok) {
            var msg = body && body.error && (body.error.message || body.error) || ('HTTP ' + r.status);
            var err = new Error(typeof msg === 'string' ? msg : 'HTTP ' + r.status);
            err.status = r.status;
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
      history.replaceState(null, '', location.pathname + location.search);
      if (want && frag.get('tab_nonce') === want) {
        sessionStorage.setItem(TOKEN_KEY, token);
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
    box.appendChild(el('div', { className: 'table-wrap' }, [el('table', {}, [el('thead', {}, [head]), el('tbody', {}, body)])]));
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

  function start() {
    state.token = takeToken();
    if (!state.token) { showSignIn(); return; }
    api(state.config.programsURL).then(function (body) {
      var d = body.data || {};
      state.programs = d.programs || [];
      var user = d.user || {};
      $('who').textContent = user.email || user.name || '';
      $('signin').hidden = true;
      $('app').hidden = false;
      $('signout').hidden = false;
      var sel = $('program');
      sel.textContent = '';
      state.programs.forEach(function (p) { sel.appendChild(el('option', { value: String(p.id), text: p.name + ' (#' + p.id + ')' })); });
      if (state.programs.length === 0) { showError('Your account is not a member of any program yet.'); return; }
      var want = new URLSearchParams(location.search).get('program');
      if (want && state.programs.some(function (p) { return String(p.id) === want; })) sel.value = want;
      load();
    }).catch(function (e) { showError(e.message); });
  }

  $('period').addEventListener('change', function () {
    var custom = $('period').value === 'custom';
    Array.prototype.forEach.call(document.querySelectorAll('.field.custom'), function (f) { f.hidden = !custom; });
    if (!custom) load();
  });
  offerLocalZone();
  $('timezone').addEventListener('change', load);
  $('program').addEventListener('change', load);
  $('dimension').addEventListener('change', load);
  $('controls').addEventListener('submit', function (e) { e.preventDefault(); load(); });
  $('signout').addEventListener('click', signOut);
  if (window.ResizeObserver) {
    new ResizeObserver(function () {
      if (state.chart) state.chart.setSize({ width: chartWidth(), height: 300 });
    }).observe($('chart').parentElement);
  }

  fetch('config.json', { credentials: 'same-origin' }).then(function (r) { return r.json(); }).then(function (c) {
    state.config = c;
    start();
  }).catch(function () { showError('The dashboard could not load its configuration.'); });
})();
