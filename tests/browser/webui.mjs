// webui.mjs — the chat page of k3 serve and the figure of k3 bench --plot in a real browser
// (Chromium through puppeteer-core), run by tests/sh/webui.sh, which starts the servers:
//   K3_URL      k3 serve on tiny5 (greedy replies of the model)
//   K3_HOLD_URL k3 serve whose every reply holds after 8 tokens until its client goes
//               (K3_SERVE_TEST_HOLD: the Stop test)
//   K3_XSS_URL  k3 serve whose every reply is crafted markup (K3_SERVE_TEST_REPLY)
//   K3_KEY_URL  k3 serve --api-key test-key
//   K3_VIS_URL  k3 serve on tiny5_vision (the tiny model with its tiny vision tower)
//   K3_IMAGE    a PNG to attach (tests/images, absolute path)
//   K3_SVG, K3_HTML  k3 bench --plot FILE.svg and -o html of a small grid
//   K3_SHOTS    folder for the screenshots; CHROMIUM the browser
import puppeteer from 'puppeteer-core';
import { readFileSync } from 'node:fs';

const env = process.env;
let fails = 0;
const ok = (m) => console.log('ok   ' + m);
const bad = (m) => { console.log('FAIL ' + m); fails++; };
const check = (c, m, why) => (c ? ok(m) : bad(m + (why ? ': ' + why : '')));

const browser = await puppeteer.launch({
  executablePath: env.CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
const dialogs = [];
async function open(url) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 640 });
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); });
  page.on('pageerror', (e) => bad('a script error on the page: ' + e.message));
  await page.evaluateOnNewDocument(() => {
    window.__pwned = 0; window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
  });
  return page;
}
const idle = (page) => page.waitForFunction(() => document.body.dataset.state === 'idle' &&
  document.getElementById('stop').disabled, { timeout: 60000 });
const conv = (page) => page.evaluate(() => {
  const cs = JSON.parse(localStorage.getItem('k3.convs')), cur = JSON.parse(localStorage.getItem('k3.cur'));
  return cs.find((c) => c.id === cur);
});
async function say(page, text) {
  await page.focus('#input');
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.body.dataset.state === 'busy' || document.getElementById('stop').disabled === false, { timeout: 10000 }).catch(() => {});
  await idle(page);
}
async function setField(page, id, v) {
  await page.$eval('#' + id, (e, v) => { e.value = v; e.dispatchEvent(new Event('change')); }, String(v));
}

try {
  // 1. load: weight, first paint, model and health shown
  const page = await open(env.K3_URL + '/');
  await page.goto(env.K3_URL + '/', { waitUntil: 'load' });
  // the browser's own paint timing (its entry comes once the frame is drawn)
  const paint = await page.evaluate(() => new Promise((done) => {
    const get = () => performance.getEntriesByType('paint');
    if (get().length) return done(get()[0].startTime);
    new PerformanceObserver((l) => done(l.getEntries()[0].startTime)).observe({ type: 'paint', buffered: true });
    setTimeout(() => done(-1), 5000);
  }));
  check(paint >= 0 && paint < 1000, `first paint ${paint.toFixed(0)} ms (< 1000)`);
  await page.waitForFunction(() => /tiny5/.test(document.getElementById('model').textContent) &&
    /ok/.test(document.getElementById('health').textContent), { timeout: 10000 });
  // page weight: the document and every file it loaded that is not an API call
  const files = ['/', ...(await page.evaluate(() => performance.getEntriesByType('resource')
    .map((e) => new URL(e.name).pathname)))].filter((f) => !/^\/(v1|health|metrics)/.test(f));
  let bytes = 0;
  for (const f of new Set(files)) bytes += (await (await fetch(env.K3_URL + f)).arrayBuffer()).byteLength;
  check(bytes > 0 && bytes <= 100 * 1024, `page weight ${bytes} bytes (<= 102400): ${[...new Set(files)].join(' ')}`);
  ok('the header shows the model, health ok and ' + await page.$eval('#memory', (e) => e.textContent));

  // 1b. the network unplugged: every request that leaves the server's origin fails; the page
  // still loads, styles itself and shows the model (no CDN, no font, nothing fetched outside)
  {
    const off = await open(env.K3_URL + '/');
    const origin = new URL(env.K3_URL).origin, outside = [];
    await off.setRequestInterception(true);
    off.on('request', (q) => {
      if (q.url().startsWith('data:') || new URL(q.url()).origin === origin) return q.continue();
      outside.push(q.url()); q.abort('internetdisconnected');
    });
    await off.goto(env.K3_URL + '/', { waitUntil: 'load' });
    await off.waitForFunction(() => /tiny5/.test(document.getElementById('model').textContent),
      { timeout: 10000 });
    const styled = await off.$eval('#input', (e) => getComputedStyle(e).fontFamily !== '' &&
      document.styleSheets.length > 0);
    // the CSP would block an outside file before any request: look at what the page names too
    const named = await off.$$eval('[src], link[href]', (n, o) => n.map((e) => e.src || e.href)
      .filter((u) => !u.startsWith('data:') && new URL(u).origin !== o), origin);
    check(outside.length === 0 && named.length === 0 && styled,
      'offline: the page loads, styled, with no request outside the server',
      outside.concat(named).join(' '));
    await off.close();
  }

  // 2. Shift+Enter is a new line, Enter sends; the streamed reply equals the API's greedy one
  await setField(page, 'max_tokens', 64);
  await page.focus('#input');
  await page.keyboard.type('Hello');
  await page.keyboard.down('Shift'); await page.keyboard.press('Enter'); await page.keyboard.up('Shift');
  await page.keyboard.type('there');
  const drafted = await page.$eval('#input', (e) => e.value);
  check(drafted === 'Hello\nthere' && (await page.$$('.msg')).length === 0,
    'Shift+Enter adds a new line without sending', JSON.stringify(drafted));
  await page.keyboard.press('Enter');
  await idle(page);
  let c = await conv(page);
  const r = await (await fetch(env.K3_URL + '/v1/chat/completions', { method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hello\nthere' }], temperature: 0,
      top_p: 1, max_tokens: 64 }) })).json();
  const got = c.messages[1], want = r.choices[0].message;
  check(got.content === want.content && got.reasoning === (want.reasoning_content || ''),
    `the streamed reply equals the API's greedy reply (${got.reasoning.length} + ${got.content.length} characters)`,
    JSON.stringify([got.content, want.content]));
  const think = await page.$eval('.msg.assistant details.think', (d) => [d.open, d.querySelector('summary').textContent, d.querySelector('div').textContent]).catch(() => null);
  check(!want.reasoning_content || (think && !think[0] && think[2] === want.reasoning_content &&
    think[1].includes(String(want.reasoning_content.length))), 'thinking folded, with its length: ' + (think && think[1]));
  const st = await page.$eval('.msg.assistant .stats', (e) => e.textContent);
  check(/TTFT [0-9.]+ s/.test(st) && /tokens\/s/.test(st) && /cached \d+ of \d+/.test(st),
    'per reply: ' + st);

  // 3. stop a reply mid-stream: the server stays healthy and frees the engine. That server
  // holds every reply after 8 tokens until its client goes (K3_SERVE_TEST_HOLD), so the
  // reply cannot end by itself before the click on any machine (a greedy reply of 1,735
  // tokens once ended before the click in a fresh-clone CI, and this failed)
  const sp = await open(env.K3_HOLD_URL + '/');
  await sp.goto(env.K3_HOLD_URL + '/', { waitUntil: 'load' });
  await idle(sp);
  await setField(sp, 'max_tokens', 3000);
  await sp.focus('#input');
  await sp.keyboard.type('Continue');
  await sp.keyboard.press('Enter');
  // the page draws every delta as it comes: it shows all 8 held tokens' text (the same
  // model's greedy 8 tokens from the main server), not only what its first frame drew
  const r8 = await (await fetch(env.K3_URL + '/v1/chat/completions', { method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Continue' }], temperature: 0,
      top_p: 1, max_tokens: 8 }) })).json();
  const m8 = r8.choices[0].message, want8 = [m8.reasoning_content || '', m8.content || ''];
  const shown = await sp.waitForFunction((w) => {
    const m = document.querySelectorAll('.msg.assistant');
    return m.length === 1 && w.every((x) => m[0].textContent.includes(x));
  }, { timeout: 30000 }, want8).then(() => true, () => false);
  const n8 = want8[0].length + want8[1].length;
  check(shown && n8 > 0, `streamed deltas drawn as they come (${n8} ` +
    'characters of 8 held tokens)', await sp.$eval('.msg.assistant', (e) => e.textContent)
    .catch(() => 'no message'));
  await sp.click('#stop');
  await idle(sp);
  const stopped = (await conv(sp)).messages[1];
  const kept = stopped ? (stopped.reasoning + stopped.content).length : 0;
  check(stopped && stopped.stats.stopped && stopped.stats.completion_tokens === undefined &&
    kept > 0, `Stop aborts the stream (${kept} characters kept)`);
  let active = -1;
  for (let i = 0; i < 300 && active !== 0; i++) {
    const m = await (await fetch(env.K3_HOLD_URL + '/metrics')).text();
    active = Number(/^k3_batch_active (\d+)/m.exec(m)[1]);
    if (active) await new Promise((s) => setTimeout(s, 100));
  }
  const h = await fetch(env.K3_HOLD_URL + '/health');
  check(h.status === 200 && active === 0, `after Stop: /health ${h.status}, k3_batch_active ${active}`);

  // 3b. the settings survive a reload, a value typed just before it too (its field still
  // focused, so no change event: they were saved on change only, and such a value was lost)
  const typed = [['max_tokens', '123'], ['temperature', '0.7'], ['top_p', '0.9'],
    ['system', 'Be brief.']];
  const lost = [];
  for (const [id, v] of typed) {
    await sp.click('#' + id, { clickCount: 3 });
    await sp.keyboard.type(v);
    await sp.reload({ waitUntil: 'load' });
    await idle(sp);
    const got = await sp.$eval('#' + id, (e) => e.value);
    if (got !== v) lost.push(`${id} ${JSON.stringify(got)} (typed ${v})`);
  }
  await sp.click('#thinking');
  await sp.reload({ waitUntil: 'load' });
  await idle(sp);
  const all = await sp.evaluate((ids) => ids.map((id) => document.getElementById(id).value)
    .concat(document.getElementById('thinking').checked), typed.map((t) => t[0]));
  check(lost.length === 0 && JSON.stringify(all) === JSON.stringify(typed.map((t) => t[1])
    .concat(false)), 'the settings (max tokens, temperature, top-p, system prompt, thinking) ' +
    'survive a reload, also one typed just before it', lost.join('; ') + ' ' + JSON.stringify(all));
  const sm = await sp.$$eval('.msg', (n) => n.map((e) => e.textContent));
  check(sm.length === 2 && /stopped/.test(sm[1]), 'the stopped reply is kept across the reloads',
    JSON.stringify(sm.length));

  // 4. reload: the conversation is kept, and its next turn resumes the server's cached prefix
  await page.bringToFront();                // (keys go to the tab in front)
  await setField(page, 'max_tokens', 16);
  await setField(page, 'temperature', 0);
  const before = await page.$$eval('.msg', (n) => n.map((e) => e.textContent));
  await page.reload({ waitUntil: 'load' });
  await idle(page);
  const after = await page.$$eval('.msg', (n) => n.map((e) => e.textContent));
  check(JSON.stringify(before) === JSON.stringify(after) && after.length === 2,
    `after a reload the conversation is back (${after.length} messages)`);
  await say(page, 'And now?');
  c = await conv(page);
  const s3 = c.messages[3].stats;
  check(s3.cached_tokens > 0, `its next turn: cached_tokens ${s3.cached_tokens} of ${s3.prompt_tokens}`);
  if (env.K3_SHOTS) await page.screenshot({ path: env.K3_SHOTS + '/webui.png' });

  // 5. untrusted output: a reply with a script, an onerror image and javascript: links
  const x = await open(env.K3_XSS_URL + '/');
  await x.goto(env.K3_XSS_URL + '/', { waitUntil: 'load' });
  await idle(x);
  await say(x, 'show me');
  const dom = await x.evaluate(() => {
    const log = document.getElementById('log');
    return { pwned: window.__pwned, scripts: log.querySelectorAll('script, img, iframe, object').length,
      hrefs: [...log.querySelectorAll('a')].map((a) => [a.getAttribute('href'), a.rel]),
      text: log.textContent, h: log.querySelectorAll('h2').length, li: log.querySelectorAll('li').length,
      em: log.querySelectorAll('em, strong').length, pre: log.querySelectorAll('pre button').length };
  });
  check(dom.pwned === 0 && dialogs.length === 0, 'no script from the reply ran (window.__pwned 0, no dialog)');
  check(dom.scripts === 0 && dom.text.includes('<script>') && dom.text.includes('<img src=x onerror='),
    'the reply\'s <script> and <img onerror> show as text, no such element');
  check(dom.hrefs.length === 1 && dom.hrefs[0][0] === 'https://example.com/' &&
    dom.hrefs[0][1].includes('noopener') && dom.text.includes('javascript:'),
    'javascript: and data: links stay text; the https one is a link with rel=noopener',
    JSON.stringify(dom.hrefs));
  check(dom.h === 1 && dom.li === 2 && dom.em >= 2 && dom.pre === 1,
    'markdown: a heading, a list, emphasis, a code block with a copy button', JSON.stringify(dom));
  if (env.K3_SHOTS) await x.screenshot({ path: env.K3_SHOTS + '/webui_untrusted.png' });

  // 6. --api-key: the page asks for the key, then works
  const k = await open(env.K3_KEY_URL + '/');
  await k.goto(env.K3_KEY_URL + '/', { waitUntil: 'load' });
  await k.waitForSelector('#keyform:not([hidden])', { timeout: 10000 });
  await k.type('#key', 'test-key');
  await k.click('#keyform button');
  await k.waitForFunction(() => /tiny5/.test(document.getElementById('model').textContent), { timeout: 10000 });
  await setField(k, 'max_tokens', 4);
  await say(k, 'hi');
  const kc = await conv(k);
  check(kc.messages.length === 2 && kc.messages[1].role === 'assistant',
    'with --api-key the page asks for the key, then chats');

  // 7. the bench figure: axes and series, as an SVG file and inside -o html
  for (const [f, what] of [[env.K3_SVG, 'the SVG'], [env.K3_HTML, '-o html']]) {
    const p = await open('file://' + f);
    await p.goto('file://' + f, { waitUntil: 'load' });
    const g = await p.evaluate(() => {
      const svg = document.querySelector('svg'), b = svg.getBoundingClientRect();
      const pts = [...document.querySelectorAll('g.series circle')].map((c) => c.getBoundingClientRect());
      return { w: b.width, h: b.height, axes: document.querySelectorAll('g.axis').length,
        series: document.querySelectorAll('g.series').length, pts: pts.length,
        inside: pts.every((r) => r.width > 0 && r.left >= b.left && r.right <= b.right && r.top >= b.top && r.bottom <= b.bottom),
        labels: [...document.querySelectorAll('g.axis text.label')].map((t) => t.textContent) };
    });
    check(g.w > 500 && g.axes === 4 && g.series >= 2 && g.pts >= 4 && g.inside &&
      g.labels.some((l) => /\(GB\)/.test(l)) && g.labels.some((l) => /s\/token/.test(l)),
      `${what}: rendered ${g.w}x${g.h}, 4 axes (${g.labels.join('; ')}), ${g.series} series, ${g.pts} points inside`);
    if (env.K3_SHOTS && f === env.K3_SVG) await p.screenshot({ path: env.K3_SHOTS + '/bench_plot.png' });
  }

  // 8. images: attached by the file input, pasted, dropped; a thumbnail in the user's message,
  // sent as an image_url part with a data: URL; the reply equals the API's for the same body;
  // a model without a tower: a clear refusal, the image kept for another try
  if (env.K3_VIS_URL) {
    const v = await open(env.K3_VIS_URL + '/');
    const sent = [];
    v.on('request', (q) => { if (q.url().endsWith('/v1/chat/completions')) sent.push(q.postData()); });
    await v.goto(env.K3_VIS_URL + '/', { waitUntil: 'load' });
    await idle(v);
    await setField(v, 'max_tokens', 8);
    await setField(v, 'temperature', 0);
    await (await v.$('#file')).uploadFile(env.K3_IMAGE);
    await v.waitForSelector('#attached canvas[data-drawn]', { timeout: 10000 });
    await say(v, 'What is this?');
    // the message's thumbnail is drawn from the bytes asynchronously: wait for it (the check
    // below still fails when it never comes)
    await v.waitForSelector('.msg.user canvas[data-drawn]', { timeout: 10000 }).catch(() => {});
    const vd = await v.evaluate(() => ({
      user: document.querySelectorAll('.msg.user canvas[data-drawn]').length,
      size: [...document.querySelectorAll('.msg.user canvas')].map((c) => c.title),
      pending: document.querySelectorAll('#attached canvas').length, csp: window.__csp }));
    const vc = (await conv(v)).messages;
    const body = sent.length ? JSON.parse(sent[sent.length - 1]) : null;
    const part = body && Array.isArray(body.messages[0].content) ? body.messages[0].content : [];
    const png = 'data:image/png;base64,' + readFileSync(env.K3_IMAGE).toString('base64');
    check(vd.user === 1 && vd.pending === 0, 'an attached image: its thumbnail in the user message (' + vd.size + ')', JSON.stringify(vd));
    check(part.length === 2 && part[0].type === 'image_url' && part[0].image_url.url === png &&
      part[1].type === 'text' && part[1].text === 'What is this?',
      'sent as an image_url part with the file\'s data: URL, then the text', JSON.stringify(part).slice(0, 200));
    const rv = await (await fetch(env.K3_VIS_URL + '/v1/chat/completions', { method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(Object.assign({}, body, { stream: false, stream_options: undefined })) })).json();
    const gv = vc[1], wv = rv.choices && rv.choices[0].message;
    check(gv && gv.role === 'assistant' && (gv.content + gv.reasoning).length > 0 && wv &&
      gv.content === wv.content && gv.reasoning === (wv.reasoning_content || ''),
      `a reply arrived, equal to the API's for the same body (${gv && (gv.reasoning + gv.content).length} characters)`,
      JSON.stringify([gv, wv]).slice(0, 300));
    check(vd.csp.length === 0, 'the thumbnails need no CSP change (no violation)', vd.csp.join('; '));
    // paste and drop: a File in a DataTransfer, as the browser hands them over
    const b64 = readFileSync(env.K3_IMAGE).toString('base64');
    const n2 = await v.evaluate((b64) => {
      const f = () => { const dt = new DataTransfer(); const s = atob(b64), u = new Uint8Array(s.length);
        for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
        dt.items.add(new File([u], 'x.png', { type: 'image/png' })); return dt; };
      document.getElementById('input').dispatchEvent(new ClipboardEvent('paste', { clipboardData: f(), bubbles: true, cancelable: true }));
      document.getElementById('compose').dispatchEvent(new DragEvent('drop', { dataTransfer: f(), bubbles: true, cancelable: true }));
      return 0;
    }, b64);
    await v.waitForFunction(() => document.querySelectorAll('#attached canvas[data-drawn]').length === 2, { timeout: 10000 })
      .then(() => ok('paste and drop attach an image each (2 thumbnails waiting)'), () => bad('paste/drop did not attach'));
    await v.reload({ waitUntil: 'load' });
    await idle(v);
    await v.waitForSelector('.msg.user canvas[data-drawn]', { timeout: 10000 })
      .then(() => ok('after a reload the user message still shows its thumbnail'), () => bad('no thumbnail after a reload'));
    if (env.K3_SHOTS) await v.screenshot({ path: env.K3_SHOTS + '/webui_image.png' });
    // the text-only tiny5: refused, said clearly, the image kept
    await page.bringToFront();
    await page.click('#newchat');
    await (await page.$('#file')).uploadFile(env.K3_IMAGE);
    await page.waitForSelector('#attached canvas[data-drawn]', { timeout: 10000 });
    await say(page, 'And this?');
    const ref = await page.evaluate(() => ({ err: [...document.querySelectorAll('.msg.error')].map((e) => e.textContent),
      kept: document.querySelectorAll('#attached canvas').length, users: document.querySelectorAll('.msg.user').length }));
    check(ref.err.length === 1 && /refused the image/.test(ref.err[0]) && /vision tower/.test(ref.err[0]) &&
      ref.kept === 1 && ref.users === 0, 'a model without a tower: "' + (ref.err[0] || '').slice(0, 90) +
      '...", the image kept for another try', JSON.stringify(ref));
  }
} catch (e) {
  bad('the browser test stopped: ' + (e && e.stack ? e.stack : e));
}
await browser.close();
process.exit(fails ? 1 : 0);
