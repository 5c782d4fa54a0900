// cases_src.js — the inputs of k3's tokenizer oracle cases (used by gen_cases.js).
// Each case: { name, segs: [[repeat, text], ...], modes: ['plain'] | ['plain','special'] }.
'use strict';

const U = (...cps) => String.fromCodePoint(...cps);

// every alternative of the pattern, spec §4.3/§4.4 examples and neighbours
const ALTS = [
  '473, 921, 235', '`thinking_effort=max`.', ' role="system" type="thinking-effort"',
  'getUserName iPhone helloWorld HTTPServer parseJSONResponse', "DON'T don'x ABC'S ſ'ſ it's I'M",
  "'s 't", 'don’t', '  leading and   trailing  ', '\t\t\ttabbed', 'a\u00a0b\u3000c\u2028d\u0085e',
  'x\u200by', 'a\u200d\u200db', 'path/to/file.txt', '中文abc 你好，世界！こんにちは 한국어', '々〇x',
  'Ⅻ½²', '١٢٣٤', 'e\u0301x', '\u0301abc', 'x.\n\ny', 'x\r\ny', ' \n\n', '<|open|>message<|sep|>',
  'The capital of France is', '中文abc 你好，世界！こんにちは 한국어 ⺀々豈𮯰',
  '  leading spaces, double  spaces\tand\ttabs\nnew\n\nlines\r\n',
  'Numbers: 1234567 3.14159 1,000,000 2026-09-24 0x1F', "It's they're we've I'm you'll he'd CAN'T",
  'emoji 🙂🚀 and café naïve Zürich ﬁ', 'def f(x):\n    return x**2  # comment\n',
  'path/to/file.go https://example.com/a?b=c', "ſ K 'ſ 'K", 'a'.repeat(64),
  ' ⺀', '1〇', '中1', ' 中文', 'O\'Neil', 'ABC', 'ABCdef', 'AbC', 'aBC', 'ǅungla', 'ǅ', 'Ǆ', 'ǆ',
  '  \n  x', 'a\n\nb', 'word   x', 'word   ', ' 921', ' 中', '\n', '\r', '\r\n', '\n\r', ' ', '  ', '   ',
  '!!', ' (', '((', '="', '.\n\n', ' 🙂', '"x', '\'x', '_bar', '/file', '\tsep', ' hello',
  '...', ' ...', ' ...\n', '.\r\n\r\n', '\u00a0\u00a0x', ' \u00a0x', '\u00a0 x', 'x \n', 'x \n ', 'x\t\n\t',
  '12345678901', '1 2 3', '1,2', 'a1b2c3', 'A1', '1A', '1a', 'a1', '𝟙𝟚𝟛𝟜', '¹²³⁴', '①②③④⑤',
  '٠١٢٣٤٥٦٧٨٩', '०१२३४५६७८९', '০১২৩', '๐๑๒๓๔', '０１２３４', 'ⅠⅡⅢⅣⅤ', '〡〢〣〤', '𐄇𐄈𐄉𐄊',
  '', 'a', 'A', '.', '1', '中', 'ア', '한',
];

const WS = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
  0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
  // not White_Space but look like it, or are Python-space only
  0x200B, 0xFEFF, 0x180E, 0x200C, 0x200D, 0x2060, 0x1C, 0x1D, 0x1E, 0x1F];
const WS_CTX = ['a{}b', 'a{}{}b', '{}1', '{}中', 'x{}', '{}\n', '.{}.', '{}{}{}x', '{}', 'A{}B',
  '{} x', 'x {}', '{}\r\n', '1{}2', '{}🙂', '{}\u0301'];

// scripts and sample strings (Unicode 16.0.0)
const SCRIPTS = {
  han_uro: '中文字漢語', han_extA: U(0x3400, 0x3401, 0x4DBF), han_extB: U(0x20000, 0x20001, 0x2A6DF),
  han_extC: U(0x2A700, 0x2B739), han_extD: U(0x2B740, 0x2B81D), han_extE: U(0x2B820, 0x2CEA1),
  han_extF: U(0x2CEB0, 0x2EBE0), han_extG: U(0x30000, 0x3134A), han_extH: U(0x31350, 0x323AF),
  han_extI: U(0x2EBF0, 0x2EE5D), han_compat: U(0xF900, 0xFA0D, 0xFA6D, 0xFA70, 0xFAD9),
  han_compat_sup: U(0x2F800, 0x2FA1D), radicals: U(0x2E80, 0x2E81, 0x2E99, 0x2E9B, 0x2EF3),
  kangxi: U(0x2F00, 0x2F01, 0x2FD5), han_marks: '々〇〆〻〸〹〺', hangzhou: '〡〢〩', han_16fe: U(0x16FE2, 0x16FE3, 0x16FF0, 0x16FF1),
  hiragana: 'こんにちは', katakana: 'カタカナー', halfwidth_kana: 'ｶﾀｶﾅ', hangul: '한국어 문장',
  jamo: U(0x1100, 0x1161, 0x11A8), arabic: 'مرحبا بالعالم', arabic_marks: 'مُحَمَّد', hebrew: 'שָׁלוֹם',
  devanagari: 'नमस्ते दुनिया', bengali: 'বাংলা', tamil: 'தமிழ்', thai: 'สวัสดีครับ', lao: 'ສະບາຍດີ',
  tibetan: 'བོད་ཡིག', georgian: 'ქართული', armenian: 'Հայերեն', greek: 'Ελληνικά ΑΒΓ αβγ',
  cyrillic: 'Привет МИР мир', latin_ext: 'ĀāĂăŉſẞß', combining: 'a\u0300\u0301\u0302e\u0308',
  lone_marks: '\u0301\u0302\u0303', enclosing: '1\u20E3#\u20E3', emoji: '😀🙂🚀',
  emoji_zwj: '👨\u200D👩\u200D👧\u200D👦', emoji_mod: '👍🏽👋🏿', flags: '🇯🇵🇺🇸', emoji_vs: '❤\uFE0F☺\uFE0E',
  keycap: '#\uFE0F\u20E3', math: '∑∫√∞≠≤', arrows: '←↑→↓', box: '┌─┐│└┘', currency: '$€£¥₹',
  fullwidth: 'ＡＢＣａｂｃ！？', superscript_letters: 'ᵃᵇᶜ', modifier: 'ʰʲʷˠ', titlecase: 'ǅǈǋǲ',
  private_use: U(0xE000, 0xF8FF), unassigned: U(0x0378, 0x1FFFE), noncharacter: U(0xFFFE, 0xFFFF),
  // new in Unicode 16.0
  garay: U(0x10D4A, 0x10D50, 0x10D70, 0x10D40), kirat_rai: U(0x16D40, 0x16D43, 0x16D70, 0x16D71),
  sunuwar: U(0x11BC0, 0x11BE1, 0x11BF0), tulu: U(0x11380, 0x11381, 0x113B8), todhri: U(0x105C0, 0x105C1),
  latin16: U(0xA7CB, 0xA7CC, 0xA7CD, 0xA7DA, 0xA7DB, 0xA7DC), egyptian_ext: U(0x13460, 0x13461),
  myanmar_ext: U(0x116D0, 0x116D1), ol_onal: U(0x1E5D0, 0x1E5F1), symbols16: U(0x1CC00, 0x1CC01, 0x1FBCB),
  outlined_digits: U(0x1CCF0, 0x1CCF1, 0x1CCF9),
};
const SCRIPT_CTX = ['{}', ' {}', 'a{}', '{}a', 'A{}', '{}A', '1{}', '{}1', '.{}', '{}.', '{}\n', '中{}',
  '{}中', "{}'s", '{} {}', '"{}"', '{}{}', '\t{}', '\u00a0{}', '{}123'];

const CODE = [
  '#include <stdio.h>\nint main(void) {\n\treturn 0;\n}\n', 'for (int i = 0; i < n; i++) x[i] += y[i];',
  'def __init__(self, *args, **kwargs):\n        super().__init__()\n', 'const f = (a, b) => a ?? b;',
  '{"key": [1, 2.5e-3, true, null], "k2": "v\\"q"}', 'SELECT * FROM t WHERE id = 42;',
  '<div class="x">Hello&nbsp;world</div>', '    indented\n        more\n', 'a&&b||!c', 'x<<=2; y>>>=1;',
  'https://example.com/path?q=1&r=ä#frag', 'mailto:someone@example.org', 'C:\\Windows\\System32',
  '$ ls -la | grep "\\.c$" > out.txt 2>&1', 'fn main() -> Result<(), Box<dyn Error>> {}', '0xDEADBEEF 0b1010 1e10 1_000',
  'snake_case_name camelCaseName PascalCaseName SCREAMING_CASE kebab-case', '// comment\n/* block */\n',
  '\r\n\r\n', 'line1\rline2', 'tab\tsep\tvalues\n1\t2\t3\n', '```python\nprint("hi")\n```\n',
];

const SPECIAL_TEXTS = (N, names) => {
  const r = [...names.slice(0, 24), names[64], names[65], names[66], names[200], names[254], names[255]];
  const t = [];
  for (const nm of r) t.push(nm, `x${nm}y`, ` ${nm} `, `${nm}${nm}`, nm.slice(0, -1), `<${nm}>`);
  t.push('[BOS]hello[EOS]', '<|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|>',
    '<|open|<|open|>', '<|reserved_token_' + (N + 8) + '|>', '<|reserved_token_' + (N + 16) + '|',
    '<|reserved_token_0|>', `<|reserved_token_${N - 1}|>`, `<|reserved_token_${N + 256}|>`,
    '[UNK][PAD][EOT]', '[BOS', 'BOS]', '<osagent_mode><osagent_mode>', '<|media_begin|>image 64x64<|media_content|><|media_pad|><|media_end|>',
    'a<|im_end|>b', '<|im_user|>', '[start_header_id]user[end_header_id]');
  return t;
};

function buildCases({ N, rand, names }) {
  const cases = [];
  const add = (name, text, modes) => cases.push({ name, segs: [[1, text]], modes: modes || ['plain'] });
  ALTS.forEach((s, i) => add(`alt_${i}`, s, ['plain', 'special']));
  for (const w of WS) for (const [j, ctx] of WS_CTX.entries())
    add(`ws_${w.toString(16)}_${j}`, ctx.split('{}').join(String.fromCodePoint(w)));
  // contractions: every suffix, every case pattern, three apostrophes, several contexts
  const SUF = ['s', 't', 're', 've', 'm', 'll', 'd', 'ſ', 'x', 'S', 'T'];
  const variants = (s) => { const out = new Set(); const n = s.length;
    for (let m = 0; m < (1 << n); m++) out.add([...s].map((c, k) => (m >> k) & 1 ? c.toUpperCase() : c).join('')); return [...out]; };
  let k = 0;
  for (const suf of SUF) for (const v of variants(suf)) for (const ap of ["'", '’', 'ʼ'])
    for (const ctx of ['word{}', 'WORD{}', '{}', ' {}', '1{}', 'Wo{}rd', '{}ing', 'ſ{}', 'i{} ok', 'O{}', '中{}', '{}\n'])
      add(`contr_${k++}`, ctx.split('{}').join(ap + v));
  for (const w of ["s", "n", "o", "d", "l", "t", "rs", "ns", "S", "N", "O", "D", "L", "T", "RS", "Ns"])
    for (const suf of ["ſ", "s", "S", "t", "T", "re", "rE", "Re", "RE", "ve", "VE", "m", "M", "ll", "LL", "lL", "d", "D", "x"])
      for (const ctx of ['{}', ' {}', 'a{}', 'A{}', '{} ok'])
        add(`contr_${k++}`, ctx.split('{}').join(w + "'" + suf));
  for (const [nm, s] of Object.entries(SCRIPTS)) SCRIPT_CTX.forEach((ctx, j) => add(`sc_${nm}_${j}`, ctx.split('{}').join(s)));
  CODE.forEach((s, i) => add(`code_${i}`, s));
  SPECIAL_TEXTS(N, names).forEach((s, i) => add(`special_${i}`, s, ['plain', 'special']));
  // long runs around the 25,000-character chunking and the 400,000-character window
  const L = (name, segs, modes) => cases.push({ name, segs, modes: modes || ['plain'] });
  L('long_a_25001', [[25001, 'a']]);
  L('long_nonws_boundary', [[4000, 'abcdefg']]);
  L('long_space_30000_x', [[30000, ' '], [1, 'x']]);
  L('long_nl_26000', [[26000, '\n']]);
  L('long_han_25001', [[12501, '中国']]);
  L('long_digits_25002', [[25002, '7']]);
  L('long_dashes_30000', [[30000, '-']]);
  L('long_mixed_ws', [[1, 'x'], [26000, ' '], [5, '\u3000'], [1, 'y']]);
  L('long_py_space_1c', [[24999, '-'], [1, '\u001c'], [24999, '-']]);
  L('long_nbsp_seam', [[24999, '-'], [3, '\u00a0'], [24999, '-']]);
  L('long_dots', [[26000, '.'], [1, '\n']]);
  L('long_special_seam', [[24998, '-'], [1, '<|end_of_msg|>']], ['plain', 'special']);
  // Python str.isspace() but not regex \s (U+001C..U+001F): visible only where the 25k split moves
  for (const c of ['\u001c', '\u001d', '\u001e', '\u001f', '\u0085', '\u00a0', '\u3000', '\u200b']) {
    const h = c.codePointAt(0).toString(16);
    L(`long_pysp_letters_${h}`, [[24990, '-'], [1, c], [20, '-']]);
    L(`long_pysp_spaces_${h}`, [[24995, ' '], [1, c], [10, ' ']]);
  }
  L('long_window_400k', [[1, 'x'], [420000, ' ']]);
  // seeded random multi-script strings
  const POOL = ['a', 'b', 'Z', 'Q', 'é', 'ſ', 'ǅ', "'", "'s", "'LL", '’', ' ', '  ', '\t', '\n', '\r\n', '\u00a0',
    '\u3000', '\u2028', '\u0085', '\u200b', '\ufeff', '\u200d', '\u0301', '\u20e3', '1', '23', '٣', '½', 'Ⅻ',
    '中', '文', '々', '〇', '⺀', '⼀', '豈', U(0x2EBF0), U(0x20000), 'こ', 'カ', 'ー', '한', 'ㄱ', 'م', 'ُ', 'न',
    '्', 'ส', 'ั', 'α', 'Ω', 'Я', 'ж', '.', ',', '!', '?', '"', '(', ')', '<', '>', '|', '_', '-', '/',
    '\\', '#', '$', '🙂', '👍', '🏽', '🇯', '🇵', '\u001c', '\u000b', U(0x10D50), U(0x16D70), U(0xA7CB),
    '<|open|>', '<|sep|>', '[EOS]', `<|reserved_token_${N + 30}|>`, '<|', '|>', 'http://', 'x=1;', 'DON', "N'T"];
  for (let i = 0; i < 1100; i++) {
    const n = 1 + Math.floor(rand() * (i < 800 ? 24 : 80));
    let s = '';
    for (let j = 0; j < n; j++) s += POOL[Math.floor(rand() * POOL.length)];
    add(`rand_${i}`, s, ['plain', 'special']);
  }
  // random code points from all planes (letters, marks, numbers, symbols of every script)
  for (let i = 0; i < 300; i++) {
    let s = '';
    const n = 1 + Math.floor(rand() * 12);
    for (let j = 0; j < n; j++) {
      let c;
      do { c = rand() < 0.7 ? Math.floor(rand() * 0x3400) : Math.floor(rand() * 0x32400); } while (c >= 0xD800 && c < 0xE000);
      s += String.fromCodePoint(c);
      if (rand() < 0.3) s += ' ';
    }
    add(`randcp_${i}`, s);
  }
  return cases;
}
module.exports = { buildCases };
