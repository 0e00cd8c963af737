/* svc browser tracker. ES5, no dependencies, no build step.
 * <script src="{base}/svc.js" data-program-id="N" async></script>
 * Optional: data-api (API base, default the script's origin),
 * data-cookie-domain (force the cookie's domain). */
(function (w, d) {
  'use strict';
  var prior = w.svc;
  // Loaded twice: keep the first instance so a page load is counted once.
  if (prior && prior.clickId) return;
  var COOKIE = 'svc_click_id', OURS = /^cust_\d+_\d+$/, loc = w.location;
  var script = d.currentScript || find();
  var attr = function (n) { return (script && script.getAttribute(n)) || ''; };
  var pid = attr('data-program-id'), cfgDomain = attr('data-cookie-domain');
  var api = (attr('data-api') || origin(script ? script.src : '')).replace(/\/+$/, '');
  var secure = loc.protocol === 'https:';
  var cid = readCookie(COOKIE), clicking = false, waiters = [], visited = false;
  // Why this tab's last click was not recorded ({status, message}) or null.
  var failed = remember();
  if (/^\d+$/.test(pid)) pid = parseInt(pid, 10);

  function find() {
    var s = d.getElementsByTagName('script');
    for (var i = s.length - 1; i >= 0; i--) if (/\/svc\.js([?#]|$)/.test(s[i].src)) return s[i];
    return null;
  }
  function origin(u) { var a = d.createElement('a'); a.href = u; return a.protocol + '//' + a.host; }
  function param(n) {
    var m = loc.search.match(new RegExp('[?&]' + n + '=([^&#]*)'));
    try { return m ? decodeURIComponent(m[1].replace(/\+/g, ' ')) : ''; } catch (e) { return ''; }
  }
  function readCookie(n) {
    var m = d.cookie.match(new RegExp('(?:^|;\\s*)' + n + '=([^;]*)'));
    try { return m ? decodeURIComponent(m[1]) : null; } catch (e) { return null; }
  }
  function writeCookie(n, v, maxAge, domain) {
    d.cookie = n + '=' + encodeURIComponent(v) + '; path=/; max-age=' + maxAge +
      (domain ? '; domain=' + domain : '') + '; SameSite=Lax' + (secure ? '; Secure' : '');
  }
  // The shortest domain suffix the browser accepts is the registrable
  // domain (public suffixes such as co.uk are refused), found without
  // shipping a suffix list: write a probe cookie on ever longer suffixes
  // and keep the first one that reads back.
  function rootDomain() {
    if (cfgDomain) return cfgDomain;
    var host = loc.hostname, parts = host.split('.'), v = String(Math.random()).slice(2);
    if (parts.length < 2 || /^[\d.]+$/.test(host) || host.indexOf(':') >= 0) return '';
    for (var i = 2; i <= parts.length; i++) {
      var dom = parts.slice(-i).join('.');
      writeCookie('svc_probe', v, 10, dom);
      if (readCookie('svc_probe') === v) { writeCookie('svc_probe', '', -1, dom); return dom; }
    }
    return '';
  }
  // In sessionStorage, so a lead on a later page of the visit still knows
  // why there is no click id. remember() reads, remember(v) writes.
  function remember(v) {
    try {
      if (!arguments.length) return JSON.parse(w.sessionStorage.getItem('svc_click_error'));
      w.sessionStorage.setItem('svc_click_error', JSON.stringify(v));
    } catch (e) { }
    return null;
  }
  // The browser does not tell a network failure from a CORS refusal.
  function noAnswer(path) {
    return 'no response from ' + api + path + ' (network error, timeout or CORS refusal; the browser does not say which). ' +
      'This page\'s origin ' + origin(loc.href) + ' may not be in the program\'s allowed origins; add it to allowed_origins in the program settings' +
      (pid ? ' (PATCH /api/v1/programs/' + pid + '/settings)' : '');
  }
  // cb(err, body) runs exactly once, also when the request cannot start.
  function send(path, body, cb) {
    var x = new XMLHttpRequest();
    try {
      x.open('POST', api + path, true);
      x.setRequestHeader('Content-Type', 'application/json');
      x.timeout = 15000;
      x.onreadystatechange = function () {
        if (x.readyState !== 4) return;
        var res = null;
        try { res = JSON.parse(x.responseText); } catch (e) { }
        var er = res && res.error, msg = er ? er.message || er.code : res && res.message;
        reply(x.status >= 200 && x.status < 300 && res ? null :
          { status: x.status, message: x.status ? msg || 'request failed' : noAnswer(path) }, res);
      };
      x.send(JSON.stringify(body));
    } catch (e) { reply({ status: 0, message: String(e) }, null); }
    function reply(err, res) { try { cb(err, res); } catch (e) { } }
  }
  // A browser session is a tab's life on the site: sessionStorage is per
  // tab and per origin, which is what the session_id field means.
  function session() {
    try {
      var st = w.sessionStorage, v = st.getItem('svc_session_id');
      if (!v) st.setItem('svc_session_id', v = (+new Date()).toString(36) + Math.random().toString(36).slice(2, 10));
      return v;
    } catch (e) { return undefined; }
  }
  function afterClick(fn) { if (clicking) waiters.push(fn); else fn(); }

  function setParam(url, k, v) {
    var h = url.indexOf('#'), hash = h < 0 ? '' : url.slice(h), u = h < 0 ? url : url.slice(0, h);
    var re = new RegExp('([?&])' + k + '=([^&]*)'), m = u.match(re);
    if (m) return OURS.test(decodeURIComponent(m[2])) ? u.replace(re, '$1' + k + '=' + v) + hash : url;
    return u + (u.indexOf('?') < 0 ? '?' : '&') + k + '=' + v + hash;
  }
  // Payment links, buy buttons and pricing tables carry the click as
  // client_reference_id; a value the page set itself is left alone.
  function decorate(root) {
    if (!cid || !root || !root.querySelectorAll) return;
    var id = encodeURIComponent(cid), sel = 'a[href*="buy.stripe.com"],stripe-buy-button,stripe-pricing-table';
    var els = [root].concat([].slice.call(root.querySelectorAll(sel)));
    for (var i = 0; i < els.length; i++) {
      var el = els[i], tag = (el.tagName || '').toLowerCase();
      if (tag === 'a' && el.hostname === 'buy.stripe.com') {
        var href = setParam(el.getAttribute('href'), 'client_reference_id', id);
        if (href !== el.getAttribute('href')) el.setAttribute('href', href);
      } else if (tag === 'stripe-buy-button' || tag === 'stripe-pricing-table') {
        var cur = el.getAttribute('client-reference-id');
        if ((!cur || OURS.test(cur)) && cur !== cid) el.setAttribute('client-reference-id', cid);
      }
    }
  }

  var svc = {
    clickId: function () { return readCookie(COOKIE) || cid; },
    // Resolves (never rejects, so an await cannot throw into the page) with
    // the server's body, or {success:false, error:{status, message}}.
    lead: function (opts, cb) {
      opts = opts || {};
      var resolve, p = w.Promise ? new w.Promise(function (r) { resolve = r; }) : undefined;
      function done(err, body) {
        try { if (typeof cb === 'function') cb(err, body); } catch (e) { }
        if (resolve) resolve(err ? { success: false, error: err } : body);
      }
      afterClick(function () {
        var id = svc.clickId();
        if (!id) return done(failed || { status: 0, message: 'no click id: the visitor did not come through a referral link' });
        send('/api/v1/track/lead', { click_id: id, customer_key: opts.customer_key, email: opts.email, program_id: pid || undefined }, done);
      });
      return p;
    },
    visit: function (cb) {
      afterClick(function () {
        if (!pid) return;
        send('/api/v1/track/visit', {
          program_id: pid, page_url: loc.href, referrer_url: d.referrer, session_id: session(),
          click_id: svc.clickId() || undefined
        }, cb || function () { });
      });
    },
    push: function (c) {
      try {
        if (typeof c === 'function') c(svc);
        else if (c && c[0] !== 'push' && typeof svc[c[0]] === 'function') svc[c[0]].apply(svc, [].slice.call(c, 1));
      } catch (e) { }
    }
  };
  for (var k in svc) if (svc.hasOwnProperty(k)) svc[k] = guard(svc[k]);
  function cut(s, n) { s = String(s || ''); return s.length <= n ? s : Array.from(s).slice(0, n).join(''); }
  function guard(fn) { return function () { try { return fn.apply(svc, arguments); } catch (e) { } }; }

  try {
    var code = param('aff') || param('via');
    if (code) {
      clicking = true;
      var canon = d.querySelector('link[rel="canonical"]');
      var tz; try { tz = w.Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { }
      send('/api/v1/track/click', {
        affiliate_url: loc.href, page_url: cut((canon && canon.href) || loc.href, 2048), page_title: cut(d.title, 255),
        referrer_url: cut(d.referrer, 2048), session_id: session(), user_agent: cut(navigator.userAgent, 2048),
        screen_resolution: screen.width + 'x' + screen.height,
        viewport_size: (w.innerWidth || 0) + 'x' + (w.innerHeight || 0),
        language: navigator.language, timezone: tz, program_id: pid || undefined,
        existing_click_id: cid || undefined
      }, function (err, res) {
        if (!err && res.click_id) {
          cid = res.click_id;
          writeCookie(COOKIE, cid, Math.round((res.cookie_window_days || 60) * 86400), rootDomain());
          remember(failed = null);
        } else if (err) {
          // Refused or unanswered: say so now, and to a later lead.
          remember(failed = { status: err.status, message: 'the click was not recorded: ' + (err.status ? err.status + ' ' : '') + err.message });
          try { w.console.warn('svc: ' + failed.message); } catch (e) { }
        }
        clicking = false;
        decorate(d);
        while (waiters.length) { try { waiters.shift()(); } catch (e) { } }
      });
    }
    afterClick(function () { if (!visited) { visited = true; svc.visit(); } });
    decorate(d);
    if (w.MutationObserver) {
      new w.MutationObserver(function (ms) {
        try {
          for (var i = 0; i < ms.length; i++)
            for (var j = 0; j < ms[i].addedNodes.length; j++) decorate(ms[i].addedNodes[j]);
        } catch (e) { }
      }).observe(d.documentElement, { childList: true, subtree: true });
    }
  } catch (e) { }

  // Commands queued before load (window.svc = window.svc || []; svc.push([...]))
  // run now; later pushes run at once.
  w.svc = svc;
  if (prior && prior.length) for (var i = 0; i < prior.length; i++) svc.push(prior[i]);
})(window, document);
