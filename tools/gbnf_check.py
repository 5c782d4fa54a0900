#!/usr/bin/env python3
"""gbnf_check.py — an independent GBNF recogniser for the grammar tests (tests/sh/grammar.sh).

Written from llama.cpp's grammars/README.md notation, not from src/text/grammar*.c: the text
is parsed into a tree (rules, alternatives, sequences, items with {min, max} repetition) and
a string is matched by computing, for each node and start position, the set of positions
where a match can end (memoised per rule and position). No stack sets, no automaton.

  gbnf_check.py GRAMMAR_FILE REPLIES.jsonl [FIELD]
      every line's FIELD ("text" by default; a JSON path like choices.0.text works) must be
      a whole sentence of the grammar; prints "ok N" or the first failures, exit 1.
  gbnf_check.py GRAMMAR_FILE --string S     exit 0 when S is a sentence.
"""
import json
import sys

sys.setrecursionlimit(200000)

ESC = {'n': '\n', 'r': '\r', 't': '\t', '\\': '\\', '"': '"', '[': '[', ']': ']', '-': '-'}


class Parser:
    def __init__(self, text):
        self.s, self.i, self.rules = text, 0, {}

    def err(self, msg):
        raise SyntaxError('%s at offset %d' % (msg, self.i))

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ''

    def ws(self, newlines):
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in ' \t\r' or (newlines and c == '\n'):
                self.i += 1
            elif c == '#':
                while self.i < len(self.s) and self.s[self.i] != '\n':
                    self.i += 1
            else:
                break

    def name(self):
        j = self.i
        while self.i < len(self.s) and (self.s[self.i].isascii() and
                                        (self.s[self.i].isalnum() or self.s[self.i] in '-_')):
            self.i += 1
        if j == self.i:
            self.err('name expected')
        return self.s[j:self.i]

    def char(self):
        c = self.peek()
        if c == '':
            self.err('end of text')
        self.i += 1
        if c != '\\':
            return c
        e = self.peek()
        self.i += 1
        if e in ESC:
            return ESC[e]
        width = {'x': 2, 'u': 4, 'U': 8}.get(e)
        if not width:
            self.err('bad escape')
        h = self.s[self.i:self.i + width]
        self.i += width
        return chr(int(h, 16))

    def grammar(self):
        self.ws(True)
        while self.i < len(self.s):
            n = self.name()
            self.ws(False)
            if not self.s.startswith('::=', self.i):
                self.err('::= expected')
            self.i += 3
            self.ws(True)
            self.rules[n] = self.alts(False)
            if self.i < len(self.s) and self.s[self.i] != '\n':
                self.err('end of rule expected')
            self.ws(True)
        return self.rules

    def alts(self, nested):
        out = [self.seq(nested)]
        while self.peek() == '|':
            self.i += 1
            self.ws(True)
            out.append(self.seq(nested))
        return ('alt', out)

    def seq(self, nested):
        items = []
        while True:
            c = self.peek()
            if c == '"':
                self.i += 1
                lit = ''
                while self.peek() != '"':
                    lit += self.char()
                self.i += 1
                node = ('lit', lit)
            elif c == '[':
                self.i += 1
                neg = self.peek() == '^'
                if neg:
                    self.i += 1
                ranges = []
                while self.peek() != ']':
                    lo = self.char()
                    hi = lo
                    if self.peek() == '-' and self.s[self.i + 1:self.i + 2] != ']':
                        self.i += 1
                        hi = self.char()
                    ranges.append((ord(lo), ord(hi)))
                self.i += 1
                node = ('cls', neg, ranges)
            elif c == '.':
                self.i += 1
                node = ('any',)
            elif c == '(':
                self.i += 1
                self.ws(True)
                node = self.alts(True)
                if self.peek() != ')':
                    self.err(') expected')
                self.i += 1
            elif c and c.isascii() and (c.isalnum() or c in '-_'):
                node = ('ref', self.name())
            else:
                return ('seq', items)
            self.ws(nested)
            while self.peek() in ('*', '+', '?', '{') and self.peek():
                op = self.peek()
                self.i += 1
                lo, hi = {'*': (0, None), '+': (1, None), '?': (0, 1)}.get(op, (None, None))
                if op == '{':
                    j = self.s.index('}', self.i)
                    body = self.s[self.i:j].replace(' ', '')
                    self.i = j + 1
                    if ',' in body:
                        a, b = body.split(',')
                        lo, hi = int(a or 0), (int(b) if b else None)
                    else:
                        lo = hi = int(body)
                node = ('rep', node, lo, hi)
                self.ws(nested)
            items.append(node)


class Matcher:
    def __init__(self, rules, s):
        self.rules, self.s, self.memo = rules, s, {}

    def ends(self, node, i):
        """The positions where a match of node starting at i can end."""
        k = node[0]
        s = self.s
        if k == 'lit':
            return {i + len(node[1])} if s.startswith(node[1], i) else set()
        if k in ('cls', 'any'):
            if i >= len(s):
                return set()
            if k == 'any':
                return {i + 1}
            c = ord(s[i])
            inside = any(lo <= c <= hi for lo, hi in node[2])
            return {i + 1} if inside != node[1] else set()
        if k == 'ref':
            key = (node[1], i)
            if key not in self.memo:
                self.memo[key] = set()         # no left recursion: never read while computed
                self.memo[key] = self.ends(self.rules[node[1]], i)
            return self.memo[key]
        if k == 'alt':
            out = set()
            for a in node[1]:
                out |= self.ends(a, i)
            return out
        if k == 'seq':
            cur = {i}
            for it in node[1]:
                nxt = set()
                for p in cur:
                    nxt |= self.ends(it, p)
                cur = nxt
                if not cur:
                    break
            return cur
        if k == 'rep':
            _, item, lo, hi = node
            out = {i} if lo == 0 else set()
            cur, n, seen = {i}, 0, set()
            while cur and (hi is None or n < hi):
                nxt = set()
                for p in cur:
                    nxt |= self.ends(item, p)
                n += 1
                if hi is None and n >= lo:          # past the minimum: positions, not counts
                    nxt -= seen
                    seen |= nxt
                cur = nxt
                if n >= lo:
                    out |= cur
            return out
        raise ValueError(k)


def sentence(rules, s):
    return len(s) in Matcher(rules, s).ends(('ref', 'root'), 0)


def field(obj, path):
    for part in path.split('.'):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def main():
    rules = Parser(open(sys.argv[1], encoding='utf-8').read()).grammar()
    if sys.argv[2] == '--string':
        sys.exit(0 if sentence(rules, sys.argv[3]) else 1)
    path = sys.argv[3] if len(sys.argv) > 3 else 'text'
    bad = n = 0
    for line in open(sys.argv[2], encoding='utf-8'):
        if not line.strip():
            continue
        n += 1
        text = field(json.loads(line), path)
        if not sentence(rules, text):
            bad += 1
            if bad <= 3:
                print('not a sentence of %s: %r' % (sys.argv[1], text))
    print('%s %d replies of %s' % ('FAIL' if bad else 'ok', n, sys.argv[1]))
    sys.exit(1 if bad or not n else 0)


if __name__ == '__main__':
    main()
