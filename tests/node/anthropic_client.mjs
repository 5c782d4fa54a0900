// anthropic_client.mjs — k3 serve's /v1/messages through the official Anthropic Node client
// (npm `@anthropic-ai/sdk`), run by anthropic_client.sh: a message, the same one streamed
// (the client's own accumulation must equal it), count_tokens, the errors the client
// raises (401 without the key, 400 naming the field), and, against a server whose reply is
// a fixed tool call (K3_TOOL_URL), a multi-turn tool conversation, streamed and not: the
// tool_use block, its tool_result sent back, the next turn. Prints one line per check and
// "N passed, N failed".
import Anthropic from '@anthropic-ai/sdk';

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
} catch (e) {
  failed++;
  console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
