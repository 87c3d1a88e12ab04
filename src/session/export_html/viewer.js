
(function () {
  'use strict';
  // pith session viewer. The page is complete without this script; it adds showing one branch
  // at a time, navigation by the tree (and #e-<id> links), search, keyboard shortcuts, and the
  // download of sessions too large for a data: link. It reads the page, never the network.
  var doc = document, body = doc.body;
  var dataEl = doc.getElementById('pith-data');
  if (!dataEl) return;
  var data;
  try { data = JSON.parse(dataEl.textContent); } catch (e) { return; }
  var parent = data.parent || [], n = parent.length, leaf = data.leaf;
  var el = new Array(n), row = new Array(n), k, i, list;

  list = doc.querySelectorAll('#main [data-i]');
  for (k = 0; k < list.length; k++) {
    i = +list[k].getAttribute('data-i');
    if (i >= 0 && i < n && !el[i]) el[i] = list[k];
  }
  list = doc.querySelectorAll('#side a[data-i]');
  for (k = 0; k < list.length; k++) {
    i = +list[k].getAttribute('data-i');
    if (i >= 0 && i < n) row[i] = list[k].parentNode;
  }

  // The newest leaf (highest index) under every entry: leaves in decreasing order each mark
  // their ancestors until one is already marked (by a newer leaf), so this is linear.
  var hasKids = new Uint8Array(n), newest = new Int32Array(n).fill(-1);
  for (i = 0; i < n; i++) if (parent[i] >= 0 && parent[i] < n) hasKids[parent[i]] = 1;
  for (i = n - 1; i >= 0; i--) {
    if (hasKids[i]) continue;
    newest[i] = i;
    for (var p = parent[i], g = 0; p >= 0 && p < n && newest[p] < 0 && g < n; p = parent[p], g++) newest[p] = i;
  }

  var onView = new Uint8Array(n), shown = [], target = -1;

  function pathTo(t) {
    var out = [];
    for (var p = t, g = 0; p >= 0 && p < n && g <= n; p = parent[p], g++) out.push(p);
    return out.reverse();
  }

  function show(leafIdx) {
    for (k = 0; k < shown.length; k++) {
      i = shown[k];
      onView[i] = 0;
      if (el[i]) el[i].classList.remove('on');
      if (row[i]) row[i].classList.remove('v');
    }
    shown = leafIdx >= 0 ? pathTo(leafIdx) : [];
    for (k = 0; k < shown.length; k++) {
      i = shown[k];
      onView[i] = 1;
      if (el[i]) el[i].classList.add('on');
      if (row[i]) row[i].classList.add('v');
    }
  }

  function go(t, scroll) {
    if (t < 0 || t >= n) return;
    if (body.classList.contains('paths') && !onView[t]) show(newest[t] >= 0 ? newest[t] : t);
    if (target >= 0 && row[target]) row[target].classList.remove('at');
    target = t;
    if (row[t]) {
      var rt = row[t];
      rt.classList.add('at');
      // Bring the row into the sidebar's view after the next frame: reading the layout now
      // would hold up the first paint of a long page.
      requestAnimationFrame(function () {
        var side = doc.getElementById('side'), r = rt.getBoundingClientRect(), s = side.getBoundingClientRect();
        if (r.top < s.top + 80 || r.bottom > s.bottom - 40) side.scrollTop += r.top - s.top - s.height / 3;
      });
    }
    var e = el[t];
    if (scroll && e) {
      e.scrollIntoView({ block: 'start' });
      var box = e.classList.contains('entry') ? e : e.closest('.entry');
      if (box) {
        box.classList.remove('flash');
        void box.offsetWidth;
        box.classList.add('flash');
      }
    }
  }

  function fromHash() {
    var h = location.hash.slice(1);
    if (!h) return -1;
    try { h = decodeURIComponent(h); } catch (e) { /* keep as is */ }
    var e = doc.getElementById(h);
    var a = e && e.closest('[data-i]');
    return a ? +a.getAttribute('data-i') : -1;
  }

  // ----- search -----
  var q = doc.getElementById('q'), status = doc.getElementById('status'), total = status ? status.textContent : '';
  var texts = null, timer = 0, hits = -1;
  // The status line: how many rows the filter and search leave. The stylesheet hides them; the
  // same rules are read here from the classes (asking the layout 10,000 times is far slower).
  var hide = {
    'default': function (c) { return c.contains('k-set') || c.contains('nt'); },
    notools: function (c) { return c.contains('k-set') || c.contains('nt') || c.contains('k-tool'); },
    user: function (c) { return !c.contains('k-user'); },
    labeled: function (c) { return !c.contains('lab'); },
    all: function () { return false; }
  };
  function count() {
    if (!status) return;
    var on = doc.querySelector('input[name=filter]:checked'), seen = 0;
    var hidden = hide[on ? on.id.slice(2) : 'default'] || hide.all;
    for (i = 0; i < n; i++) {
      if (!row[i]) continue;
      var c = row[i].classList;
      if (!c.contains('sx') && (c.contains('leaf') || !hidden(c))) seen++;
    }
    status.textContent = (hits >= 0 ? hits + ' matching · ' : '') + seen + ' of ' + n + ' entries shown';
  }
  function search(text) {
    var toks = text.toLowerCase().split(/\s+/).filter(Boolean);
    hits = toks.length ? 0 : -1;
    if (toks.length && !texts) {
      texts = new Array(n);
      for (i = 0; i < n; i++) texts[i] = ((row[i] ? row[i].textContent : '') + ' ' + (el[i] ? el[i].textContent : '')).toLowerCase();
    }
    for (i = 0; i < n; i++) {
      if (!row[i]) continue;
      var hit = true;
      for (k = 0; k < toks.length && hit; k++) hit = texts[i].indexOf(toks[k]) >= 0;
      row[i].classList.toggle('sx', !hit);
      if (hit && toks.length) hits++;
    }
    if (toks.length) count();
    else if (status) status.textContent = total;
  }

  // ----- wiring -----
  var allBtn = doc.getElementById('all-branches');
  body.classList.add('js');
  if (q) {
    q.hidden = false;
    q.addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(function () { search(q.value); }, n > 3000 ? 180 : 60);
    });
    q.addEventListener('keydown', function (ev) {
      if (ev.key === 'Escape') { q.value = ''; search(''); q.blur(); }
      if (ev.key === 'Enter') {
        for (i = 0; i < n; i++) if (row[i] && !row[i].classList.contains('sx') && row[i].offsetParent) { go(i, true); break; }
      }
    });
  }
  var radios = doc.querySelectorAll('input[name=filter]');
  for (k = 0; k < radios.length; k++) radios[k].addEventListener('change', count);
  var keys = doc.querySelector('.keys');
  if (keys) keys.hidden = false;
  if (allBtn) {
    allBtn.hidden = false;
    allBtn.addEventListener('click', function () {
      var t = target >= 0 ? target : leaf;
      if (body.classList.toggle('paths') && t >= 0) show(newest[t] >= 0 ? newest[t] : t);
      if (target >= 0) go(target, true);
    });
  }
  doc.getElementById('side').addEventListener('click', function (ev) {
    var a = ev.target.closest && ev.target.closest('a[data-i]');
    if (a && a.getAttribute('href') === location.hash) { ev.preventDefault(); go(+a.getAttribute('data-i'), true); }
  });
  window.addEventListener('hashchange', function () { go(fromHash(), true); });
  doc.addEventListener('keydown', function (ev) {
    var t = ev.target;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (t && (t.tagName === 'INPUT' && t.type !== 'checkbox' && t.type !== 'radio' || t.tagName === 'TEXTAREA')) return;
    var box;
    switch (ev.key) {
      case '/': if (q) { ev.preventDefault(); q.focus(); } break;
      case 't': case 'T': box = doc.getElementById('t-thinking'); break;
      case 'o': case 'O': box = doc.getElementById('t-tools'); break;
      case 'b': case 'B': if (allBtn) allBtn.click(); break;
      case 'j': case 'k': {
        var seq = body.classList.contains('paths') ? shown : null;
        if (!seq || !seq.length) break;
        var at = seq.indexOf(target), next = ev.key === 'j' ? at + 1 : at - 1;
        if (at < 0) next = 0;
        if (next >= 0 && next < seq.length) go(seq[next], true);
        break;
      }
    }
    if (box) box.checked = !box.checked;
  });
  var dl = doc.getElementById('dl');
  if (dl && dl.getAttribute('data-blob')) {
    dl.title = 'Download the session as JSON lines';
    dl.addEventListener('click', function (ev) {
      ev.preventDefault();
      var src = doc.getElementById('pith-jsonl');
      if (!src) return;
      var url = URL.createObjectURL(new Blob([src.textContent], { type: 'application/x-ndjson' }));
      var a = doc.createElement('a');
      a.href = url;
      a.download = dl.getAttribute('download') || 'session.jsonl';
      body.appendChild(a);
      a.click();
      body.removeChild(a);
      setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
    });
  }
  var opened = [];
  window.addEventListener('beforeprint', function () {
    opened = [].filter.call(doc.querySelectorAll('#main details:not([open])'), function (d) { d.open = true; return true; });
  });
  window.addEventListener('afterprint', function () {
    opened.forEach(function (d) { d.open = false; });
    opened = [];
  });

  // ----- start: the current branch, or the branch of the entry in the URL -----
  if (leaf >= 0 && leaf < n) {
    body.classList.add('paths');
    show(leaf);
  }
  var params = new URLSearchParams(location.search);
  var f = params.get('filter');
  if (f) {
    var radio = doc.getElementById('f-' + f.replace(/[^a-z]/g, ''));
    if (radio) {
      radio.checked = true;
      count();
    }
  }
  if (params.get('all') === '1' && allBtn) body.classList.remove('paths');
  if (q && params.get('q')) { q.value = params.get('q'); search(q.value); }
  var start = fromHash();
  if (start >= 0) go(start, true);
  else if (leaf >= 0 && leaf < n) go(leaf, false);
  // When the viewer was ready and (long pages paint before their end is parsed) when the first
  // content was painted, in ms after navigation: read by `make bench`.
  var root = doc.documentElement, fcp = performance.getEntriesByName('first-contentful-paint')[0];
  if (fcp) root.setAttribute('data-fcp', String(Math.round(fcp.startTime)));
  root.setAttribute('data-ready', String(Math.round(performance.now())));
})();
