// app.js — the chat page of k3 serve (docs/SERVE.md, "The chat page"). Talks to the
// server only through its public API: /v1/chat/completions (streamed), /v1/models,
// /health, /metrics. Images go as OpenAI image_url parts with data: URLs; their thumbnails
// are drawn on a canvas from the decoded bytes (createImageBitmap), so the CSP's img-src
// stays 'self'. Model output is untrusted: it becomes DOM nodes through md() below
// (createElement and text nodes only, never innerHTML), and the server's
// Content-Security-Policy allows no inline script at all.
'use strict';
const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

// ---- markdown into DOM nodes ----
// Links: http, https and mailto only (URL() drops the tabs and newlines a "java\tscript:"
// hides behind and lowercases the scheme); anything else stays text.
function safeHref(h) {
  try {
    const u = new URL(h, location.href);
    return ['http:', 'https:', 'mailto:'].includes(u.protocol) ? u.href : null;
  } catch (e) { return null; }
}
// Inline: `code`, **strong**, *em* / _em_, [text](url).
function inline(parent, s) {
  let i = 0, text = '';
  const flush = () => { if (text) parent.appendChild(document.createTextNode(text)); text = ''; };
  while (i < s.length) {
    const c = s[i];
    if (c === '`') {
      const j = s.indexOf('`', i + 1);
      if (j > i) {
        flush(); parent.appendChild(el('code', '', s.slice(i + 1, j))); i = j + 1; continue;
      }
    } else if (c === '*' && s[i + 1] === '*') {
      const j = s.indexOf('**', i + 2);
      if (j > i + 2) {
        flush(); inline(parent.appendChild(el('strong')), s.slice(i + 2, j)); i = j + 2; continue;
      }
    } else if ((c === '*' || c === '_') && s[i + 1] && s[i + 1] !== ' ') {
      const j = s.indexOf(c, i + 1);
      if (j > i + 1) {
        flush(); inline(parent.appendChild(el('em')), s.slice(i + 1, j)); i = j + 1; continue;
      }
    } else if (c === '[') {
      const m = /^\[([^\]]*)\]\(([^)\s]*)\)/.exec(s.slice(i));
      if (m) {
        const href = safeHref(m[2]);
        flush();
        if (href) {
          const a = parent.appendChild(el('a'));
          a.href = href; a.rel = 'noopener noreferrer'; a.target = '_blank';
          inline(a, m[1]);
        } else parent.appendChild(document.createTextNode(m[0]));   // refused: as text
        i += m[0].length;
        continue;
      }
    }
    text += c; i++;
  }
  flush();
}
function md(src) {
  const root = document.createDocumentFragment(), lines = src.split('\n');
  let para = null, list = null;
  const end = () => { para = null; list = null; };
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i];
    let m;
    if ((m = /^\s*```(.*)$/.exec(l))) {                      // fenced code, copy button
      end();
      const code = [];
      for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i]);
      const pre = root.appendChild(el('pre')), txt = code.join('\n');
      pre.appendChild(el('code', '', txt));
      const b = pre.appendChild(el('button', '', 'copy'));
      b.type = 'button';
      b.addEventListener('click', () => {
        if (!navigator.clipboard) return;
        navigator.clipboard.writeText(txt).then(() => { b.textContent = 'copied'; }, () => {});
      });
    } else if ((m = /^(#{1,6})\s+(.*)$/.exec(l))) {
      end();
      inline(root.appendChild(el('h' + m[1].length)), m[2]);
    } else if ((m = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(l))) {
      const tag = /\d/.test(m[1]) ? 'ol' : 'ul';
      if (!list || list.tagName.toLowerCase() !== tag) {
        para = null; list = root.appendChild(el(tag));
      }
      inline(list.appendChild(el('li')), m[2]);
    } else if (/^\s*$/.test(l)) end();
    else {
      list = null;
      if (para) para.appendChild(el('br')); else para = root.appendChild(el('p'));
      inline(para, l);
    }
  }
  return root;
}

// ---- state: conversations in localStorage ----
const store = {
  get(k, d) {
    try { const v = localStorage.getItem('k3.' + k); return v === null ? d : JSON.parse(v); }
    catch (e) { return d; }
  },
  set(k, v) {
    try { localStorage.setItem('k3.' + k, JSON.stringify(v)); } catch (e) { /* full */ }
  },
};
let convs = store.get('convs', []), cur = store.get('cur', null), busy = null;
const conv = () => convs.find((c) => c.id === cur);
function save() { store.set('convs', convs); store.set('cur', cur); }
function newChat() {
  const id = Date.now().toString(36) + Math.random().toString(36).slice(2, 6);
  const c = { id, title: 'New chat', messages: [] };
  convs.unshift(c); cur = c.id; save(); draw();
}

const SETTINGS = ['system', 'temperature', 'top_p', 'max_tokens', 'thinking'];
function loadSettings() {
  const s = store.get('settings', {});
  for (const k of SETTINGS) {
    if (!(k in s)) continue;
    if (k === 'thinking') $(k).checked = s[k]; else $(k).value = s[k];
  }
}
function saveSettings() {
  const s = {};
  for (const k of SETTINGS) s[k] = k === 'thinking' ? $(k).checked : $(k).value;
  store.set('settings', s);
}

// ---- images: attached as data: URLs (the server fetches nothing) ----
const BODY_MAX = 4 << 20;            // the server's request limit (HTTP_MAX_BODY): 413 above
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif'];
let pending = [];                    // data: URLs attached to the next message
function dataBlob(url) {             // data:TYPE;base64,... to a Blob, no fetch (CSP)
  const k = url.indexOf(','), bin = atob(url.slice(k + 1)), b = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
  return new Blob([b], { type: url.slice(5, url.indexOf(';')) });
}
function thumb(url) {                // a canvas, drawn once the bytes decode
  const cv = el('canvas');
  cv.width = 1; cv.height = 1;
  createImageBitmap(dataBlob(url)).then((bm) => {
    const s = Math.min(1, 160 / bm.width, 96 / bm.height);
    cv.width = Math.max(1, Math.round(bm.width * s));
    cv.height = Math.max(1, Math.round(bm.height * s));
    cv.getContext('2d').drawImage(bm, 0, 0, cv.width, cv.height);
    cv.title = bm.width + ' x ' + bm.height;
    cv.dataset.drawn = '1';
  }, () => { cv.title = 'not an image the browser can show'; });
  return cv;
}
function thumbs(urls) {
  const d = el('div', 'thumbs');
  for (const u of urls) d.appendChild(thumb(u));
  return d;
}
function drawPending() {
  const box = $('attached');
  box.replaceChildren();
  pending.forEach((u, i) => {
    const s = box.appendChild(el('span'));
    s.appendChild(thumb(u));
    const x = s.appendChild(el('button', '', '\u00d7'));
    x.type = 'button'; x.title = 'Remove this image';
    x.addEventListener('click', () => { pending.splice(i, 1); drawPending(); });
  });
}
function note(text) {                // a message of the page's own, not kept
  const n = $('log').appendChild(el('div', 'msg error', text));
  $('log').scrollTop = $('log').scrollHeight;
  return n;
}
function attach(files) {
  for (const f of files) {
    if (!IMAGE_TYPES.includes(f.type)) {
      note('Not attached: ' + (f.name || 'the pasted item') + ' is ' + (f.type || 'not an image') +
        '; k3 reads PNG, JPEG and GIF.');
      continue;
    }
    if (f.size * 4 / 3 > BODY_MAX - 65536) {
      note('Not attached: ' + (f.name || 'the image') + ' is ' + (f.size / 1048576).toFixed(1) +
        ' MB; a request to k3 serve holds at most 4 MB (about 3 MB of image).');
      continue;
    }
    const rd = new FileReader();
    rd.onload = () => { pending.push(rd.result); drawPending(); };
    rd.readAsDataURL(f);
  }
}

// ---- drawing ----
function stats(m) {
  const s = m.stats;
  if (!s) return '';
  const p = [];
  if (s.ttft !== undefined) p.push('TTFT ' + s.ttft.toFixed(2) + ' s');
  if (s.tps !== undefined) p.push(s.tps.toFixed(1) + ' tokens/s');
  if (s.completion_tokens !== undefined) p.push(s.completion_tokens + ' tokens');
  if (s.cached_tokens !== undefined)
    p.push('cached ' + s.cached_tokens + ' of ' + s.prompt_tokens + ' prompt tokens');
  if (s.drafted) p.push(s.accepted + ' of ' + s.drafted + ' drafts accepted');
  if (s.stopped) p.push('stopped');
  return p.join(' · ');
}
function msgNode(m) {
  const d = el('div', 'msg ' + m.role);
  if (m.role === 'user') {
    if (m.images && m.images.length) d.appendChild(thumbs(m.images));
    d.appendChild(document.createTextNode(m.content));
    return d;
  }
  if (m.reasoning) {
    const t = d.appendChild(el('details', 'think'));
    t.appendChild(el('summary', '', 'Thinking (' + m.reasoning.length + ' characters)'));
    t.appendChild(el('div', '', m.reasoning));
  }
  d.appendChild(el('div', 'body')).appendChild(md(m.content || ''));
  d.appendChild(el('div', 'stats', stats(m)));
  return d;
}
function draw() {
  const list = $('convs');
  list.replaceChildren();
  for (const c of convs) {
    const d = list.appendChild(el('div', c.id === cur ? 'cur' : '', c.title));
    d.addEventListener('click', () => { if (!busy) { cur = c.id; save(); draw(); } });
  }
  const log = $('log'), c = conv();
  log.replaceChildren();
  if (c) for (const m of c.messages) log.appendChild(msgNode(m));
  log.scrollTop = log.scrollHeight;
}

// ---- the API ----
const key = () => sessionStorage.getItem('k3.key') || '';
function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (key()) h.Authorization = 'Bearer ' + key();
  return h;
}
async function api(path) {
  const r = await fetch(path, { headers: headers() });
  if (r.status === 401) { $('keyform').hidden = false; throw new Error('401'); }
  return r;
}
async function status() {
  try {
    const h = await fetch('/health');
    $('health').className = 'dot ' + (h.ok ? 'ok' : 'bad');
    $('health').textContent = 'health: ' + (await h.json()).status;
  } catch (e) {
    $('health').className = 'dot bad'; $('health').textContent = 'health: unreachable';
  }
  try {
    const m = await (await api('/v1/models')).json();
    $('model').textContent = 'model: ' + m.data[0].id;
    const t = await (await api('/metrics')).text(), g = (n) => {
      const x = new RegExp('^k3_' + n + ' (\\S+)$', 'm').exec(t); return x ? Number(x[1]) : NaN;
    };
    $('memory').textContent = 'memory: peak RSS ' + (g('peak_rss_bytes') / 1e6).toFixed(0) +
      ' MB, ' + g('kept_states') + ' kept states (' + (g('kept_state_bytes') / 1e6).toFixed(1) +
      ' MB), max batch ' + g('max_batch');
  } catch (e) { /* shown by the key form or the health dot */ }
}

// the API's content: the text alone, or the images' parts then the text's
function content(x) {
  if (!x.images || !x.images.length) return x.content;
  const p = x.images.map((u) => ({ type: 'image_url', image_url: { url: u } }));
  if (x.content) p.push({ type: 'text', text: x.content });
  return p;
}
async function send(text, images) {
  const c = conv();
  const um = { role: 'user', content: text };
  if (images.length) um.images = images;
  c.messages.push(um);
  if (c.title === 'New chat') c.title = text.slice(0, 40) || 'Image';
  const m = { role: 'assistant', content: '', reasoning: '', stats: {} };
  c.messages.push(m);
  save(); draw();
  let node = $('log').lastChild;
  const msgs = [];
  if ($('system').value.trim()) msgs.push({ role: 'system', content: $('system').value });
  for (const x of c.messages.slice(0, -1)) {
    const o = { role: x.role, content: content(x) };
    if (x.role === 'assistant' && x.reasoning) o.reasoning_content = x.reasoning;
    msgs.push(o);
  }
  const body = { messages: msgs, stream: true, stream_options: { include_usage: true },
    temperature: Number($('temperature').value), top_p: Number($('top_p').value),
    max_tokens: Number($('max_tokens').value) };
  if (!$('thinking').checked) body.chat_template_kwargs = { thinking: false };
  const ac = new AbortController();
  busy = ac; $('stop').disabled = false; $('send').disabled = true;
  const t0 = performance.now();
  let tfirst = 0, redraw = 0;
  // the node drawn last is the one replaced (the first, once replaced, is out of the page)
  const update = () => { redraw = 0; const n = msgNode(m); node.replaceWith(n); node = n; };
  try {
    const js = JSON.stringify(body);
    if (js.length > BODY_MAX) {
      throw new Error('this conversation with its images is ' + (js.length / 1048576)
        .toFixed(1) + ' MB, over the 4 MB a request to k3 serve holds; start a new chat');
    }
    const r = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(),
      body: js, signal: ac.signal });
    if (!r.ok) {
      let why = 'HTTP ' + r.status;
      try { why = (await r.json()).error.message; } catch (e) { /* not JSON */ }
      // a model without a vision tower refuses images: say so first, the server's why after
      if (images.length && /image|vision/i.test(why)) {
        why = 'the server refused the image (this model reads no images?): ' + why;
      }
      throw new Error(why);
    }
    const rd = r.body.getReader(), dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await rd.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let k;
      while ((k = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, k); buf = buf.slice(k + 2);
        if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
        const j = JSON.parse(ev.slice(6));
        const u = j.usage;
        if (u) Object.assign(m.stats, { prompt_tokens: u.prompt_tokens,
          completion_tokens: u.completion_tokens,
          cached_tokens: u.prompt_tokens_details ? u.prompt_tokens_details.cached_tokens : 0,
          drafted: u.k3_draft ? u.k3_draft.drafted : 0,        // k3 serve --draft
          accepted: u.k3_draft ? u.k3_draft.accepted : 0 });
        const d = j.choices && j.choices[0] && j.choices[0].delta;
        if (!d) continue;
        if (d.reasoning_content || d.content) {
          if (!tfirst) { tfirst = performance.now(); m.stats.ttft = (tfirst - t0) / 1000; }
          m.reasoning += d.reasoning_content || '';
          m.content += d.content || '';
        }
      }
      if (!redraw) {
        redraw = requestAnimationFrame(() => {
          update(); $('log').scrollTop = $('log').scrollHeight;
        });
      }
    }
  } catch (e) {
    if (e.name === 'AbortError') m.stats.stopped = true;
    else { m.role = 'assistant error'; m.content = 'Error: ' + e.message; }
  }
  const tend = performance.now();
  if (tfirst && m.stats.completion_tokens > 1 && tend > tfirst)
    m.stats.tps = (m.stats.completion_tokens - 1) / ((tend - tfirst) / 1000);
  if (redraw) cancelAnimationFrame(redraw);
  busy = null; $('stop').disabled = true; $('send').disabled = false;
  if (m.role !== 'assistant') {                 // an error: not part of the chat
    c.messages.splice(-2, 2);
    if (!pending.length) { pending = images; drawPending(); }   // kept for another try
  }
  save(); draw();
  if (m.role !== 'assistant') $('log').appendChild(msgNode(m));
  document.body.dataset.state = 'idle';
  status();
}

// ---- wiring ----
document.addEventListener('DOMContentLoaded', () => {
  loadSettings();
  if (!conv()) newChat(); else draw();
  // saved as typed ('input'), not only on 'change': a value typed just before a reload, the
  // field still focused, was lost
  for (const k of SETTINGS) {
    for (const ev of ['input', 'change']) $(k).addEventListener(ev, saveSettings);
  }
  $('newchat').addEventListener('click', () => { if (!busy) newChat(); });
  $('stop').addEventListener('click', () => { if (busy) busy.abort(); });
  const submit = () => {
    const t = $('input').value, im = pending;
    if ((!t.trim() && !im.length) || busy) return;
    $('input').value = '';
    pending = []; drawPending();
    document.body.dataset.state = 'busy';
    send(t, im);
  };
  $('attach').addEventListener('click', () => $('file').click());
  $('file').addEventListener('change', () => { attach($('file').files); $('file').value = ''; });
  $('input').addEventListener('paste', (e) => {
    const fs = [...(e.clipboardData ? e.clipboardData.files : [])];
    if (fs.length) { e.preventDefault(); attach(fs); }
  });
  const box = $('compose');
  box.addEventListener('dragover', (e) => { e.preventDefault(); box.classList.add('drop'); });
  box.addEventListener('dragleave', () => box.classList.remove('drop'));
  box.addEventListener('drop', (e) => {
    e.preventDefault(); box.classList.remove('drop');
    attach(e.dataTransfer.files);
  });
  $('compose').addEventListener('submit', (e) => { e.preventDefault(); submit(); });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
  });
  $('keyform').addEventListener('submit', (e) => {
    e.preventDefault();
    sessionStorage.setItem('k3.key', $('key').value);
    $('keyform').hidden = true;
    status();
  });
  status();
  setInterval(status, 10000);
  document.body.dataset.state = 'idle';
});
