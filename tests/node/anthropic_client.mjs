// anthropic_client.mjs — k3 serve's /v1/messages through the official Anthropic Node client
// (npm `@anthropic-ai/sdk`), run by anthropic_client.sh: a message, the same one streamed
// (the client's own accumulation must equal it), count_tokens, the errors the client
// raises (401 without the key, 400 naming the field), and, against a server whose reply is
// a fixed tool call (K3_TOOL_URL), a multi-turn tool conversation, streamed and not: the
// tool_use block, its tool_result sent back, the next turn; against tiny5_vision
// (K3_VIS_URL), an image block (base64 source of K3_IMAGE): the reply of its chat twin (an
// image_url part sent first), resumed whole from the twin's kept state, streamed the same,
// counted by countTokens, and a wrong media_type a BadRequestError. Prints one line per
// check and "N passed, N failed".
import Anthropic from '@anthropic-ai/sdk';
import { readFileSync } from 'node:fs';

let passed = 0, failed = 0;
function check(ok, what, detail) {
  if (ok) { passed++; console.log(`ok ${what}`); }
  else { failed++; console.log(`FAIL: ${what}${detail ? ': ' + detail : ''}`); }
}
const client = (url, key) => new Anthropic({ baseURL: url, apiKey: key || 'k3-test',
                                             maxRetries: 0, timeout: 120000 });
const j = JSON.stringify;
const c = client(process.env.K3_URL);
const model = process.env.K3_MODEL || 'tiny5';
const messages = [{ role: 'user', content: 'Hello there' }];
const text = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
const thinking = (m) => m.content.filter((b) => b.type === 'thinking').map((b) => b.thinking)
  .join('');

try {
  const req = { model, max_tokens: 16, temperature: 0, system: 'You are terse.', messages };
  const m = await c.messages.create(req);
  check(m.type === 'message' && m.role === 'assistant' && /^msg_/.test(m.id) &&
        ['end_turn', 'max_tokens'].includes(m.stop_reason), 'messages.create', j(m));
  check(m.usage && m.usage.output_tokens > 0 &&
        m.usage.input_tokens + m.usage.cache_read_input_tokens > 0, 'usage', j(m.usage));

  const s = c.messages.stream(req);
  const events = [];
  s.on('streamEvent', (e) => events.push(e.type));
  const f = await s.finalMessage();
  check(text(f) === text(m) && thinking(f) === thinking(m),
        'streamed (the client\'s finalMessage) equals the non-streamed', `${j(f)} vs ${j(m)}`);
  check(f.stop_reason === m.stop_reason && f.usage.output_tokens === m.usage.output_tokens,
        'streamed stop_reason and output_tokens', j(f));
  check(events[0] === 'message_start' && events[events.length - 1] === 'message_stop' &&
        events.includes('content_block_start') && events.includes('message_delta'),
        'stream events', j(events));

  const off = await c.messages.create({ ...req, thinking: { type: 'disabled' } });
  check(!off.content.some((b) => b.type === 'thinking') && text(off).length > 0,
        'thinking disabled: text only', j(off));
  const ct = await c.messages.countTokens({ model, system: 'You are terse.', messages,
                                           thinking: { type: 'disabled' } });
  check(ct.input_tokens === off.usage.input_tokens + off.usage.cache_read_input_tokens,
        'messages.countTokens = the prompt of the message', `${j(ct)} vs ${j(off.usage)}`);

  let status = 0;
  try { await c.messages.create({ model, max_tokens: 4, messages: [] }); }
  catch (e) {
    status = e.status;
    check(e instanceof Anthropic.BadRequestError && /messages/.test(e.message) &&
          e.error && e.error.type === 'error' &&
          e.error.error.type === 'invalid_request_error', 'a 400 is a BadRequestError naming '
          + 'the field', e.message);
  }
  check(status === 400, 'empty messages: status 400', String(status));
  status = 0;
  try { await client(process.env.K3_URL, 'wrong').messages.create(req); }
  catch (e) {
    status = e.status;
    check(e instanceof Anthropic.AuthenticationError, 'a wrong key: AuthenticationError',
          e.message);
  }
  check(status === 401, 'a wrong key: status 401', String(status));

  if (process.env.K3_TOOL_URL) {
    const t = client(process.env.K3_TOOL_URL);
    const tools = [{ name: 'get_weather', description: 'Weather.', input_schema: {
      type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
    const conv = [{ role: 'user', content: 'Weather in Paris?' }];
    for (const streamed of [false, true]) {
      const how = streamed ? 'streamed' : 'not streamed';
      const turn = [...conv];
      let cached = 0;
      for (let k = 0; k < 2; k++) {
        const r = { model, max_tokens: 200, temperature: 0, tools, messages: turn,
                    tool_choice: { type: 'auto' } };
        const a = streamed ? await t.messages.stream(r).finalMessage()
                           : await t.messages.create(r);
        const use = a.content.find((b) => b.type === 'tool_use');
        check(a.stop_reason === 'tool_use' && use && use.name === 'get_weather' &&
              use.input.city === 'Paris' && thinking(a) === 'Calling.',
              `turn ${k + 1} (${how}): a tool_use block`, j(a));
        if (k) check(a.usage.cache_read_input_tokens > cached,
                     `turn 2 (${how}) resumes turn 1`, j(a.usage));
        cached = a.usage.input_tokens + a.usage.cache_read_input_tokens;
        turn.push({ role: 'assistant', content: a.content });
        turn.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id,
                                              content: '18C and sunny' }] });
      }
    }
  }

  if (process.env.K3_VIS_URL) {
    const v = client(process.env.K3_VIS_URL);
    const data = readFileSync(process.env.K3_IMAGE).toString('base64');
    const twin = await (await fetch(process.env.K3_VIS_URL + '/v1/chat/completions', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: j({ max_tokens: 5, temperature: 0, reasoning_effort: 'none', messages: [
        { role: 'user', content: [{ type: 'image_url', image_url: {
          url: 'data:image/png;base64,' + data } }, { type: 'text', text: 'What is this?' }] }]
      }) })).json();
    const im = { model, max_tokens: 5, temperature: 0, thinking: { type: 'disabled' },
                 messages: [{ role: 'user', content: [
                   { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
                   { type: 'text', text: 'What is this?' }] }] };
    const a = await v.messages.create(im);
    const n = twin.usage.prompt_tokens;
    check(text(a) === twin.choices[0].message.content && n === 54 &&
          a.usage.cache_read_input_tokens === n && a.usage.input_tokens === 0,
          `an image block (base64 source): the chat twin's reply ${j(text(a))}, all ${n} ` +
          'prompt ids from its kept state', `${j(a)} vs ${j(twin)}`);
    const sa = await v.messages.stream(im).finalMessage();
    check(text(sa) === text(a) && sa.stop_reason === a.stop_reason,
          'the image message streamed: the same text', `${j(sa)} vs ${j(a)}`);
    const ci = await v.messages.countTokens({ model, thinking: { type: 'disabled' },
                                             messages: im.messages });
    check(ci.input_tokens === n, `countTokens with the image: ${n}`, j(ci));
    status = 0;
    try {
      await v.messages.create({ ...im, messages: [{ role: 'user', content: [
        { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data } }] }] });
    } catch (e) {
      status = e.status;
      check(e instanceof Anthropic.BadRequestError && /media_type is image\/jpeg/.test(e.message),
            'a PNG sent as image/jpeg: a BadRequestError naming media_type', e.message);
    }
    check(status === 400, 'a wrong media_type: status 400', String(status));
  }
} catch (e) {
  failed++;
  console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
