import { useRef } from 'react';
import '../pages/destination-rules.css';

/**
 * A code field with syntax highlighting and no editor library: a textarea whose text is
 * transparent (its caret and selection are not) over a <pre> holding the same text as
 * coloured spans, in the same font, padding and line height, so each character of the
 * highlight sits under the character typed. Scrolling the textarea scrolls the <pre> and the
 * line numbers with it. The textarea stays the real control: typing, undo, selection, paste,
 * the keyboard (Tab moves on) and screen readers work as in any form field.
 */

export type Language = 'json' | 'javascript';
export type TokenKind = 'plain' | 'punct' | 'string' | 'key' | 'number' | 'literal' | 'keyword' | 'comment';
export interface Token {
  kind: TokenKind;
  text: string;
}

/**
 * Each language's tokens, tried in this order at each position; `plain` takes one character
 * when none matches, and runs of plain text are merged afterwards. An unterminated string or
 * comment runs to the end of its line (or of the text), as an editor shows it. `word` is an
 * identifier, told apart afterwards as a keyword, a literal or plain.
 */
const PATTERNS: Record<Language, [string, RegExp][]> = {
  json: [
    ['string', /"(?:[^"\\\n]|\\.)*"?/],
    ['number', /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/],
    ['word', /[A-Za-z_]\w*/],
    ['punct', /[{}[\]:,]/],
  ],
  javascript: [
    ['comment', /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/],
    ['string', /'(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?|`(?:[^`\\]|\\[\s\S])*`?/],
    ['number', /0[xX][\da-fA-F]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?/],
    ['word', /[A-Za-z_$][\w$]*/],
    ['punct', /[{}()[\];,.?:+\-*/%=<>!&|^~]/],
  ],
};

/** One sticky expression of named alternatives: the group that matched names the token. */
function grammarOf(language: Language): RegExp {
  const alternatives = PATTERNS[language].map(([kind, pattern]) => `(?<${kind}>${pattern.source})`);
  return new RegExp([...alternatives, '(?<plain>[\\s\\S])'].join('|'), 'y');
}

const LITERALS: Record<Language, ReadonlySet<string>> = {
  json: new Set(['true', 'false', 'null']),
  javascript: new Set(['true', 'false', 'null', 'undefined', 'NaN', 'Infinity']),
};

const KEYWORDS = new Set(
  (
    'function return const let var if else for while do switch case default break continue new delete typeof instanceof ' +
    'in of try catch finally throw this class extends super async await yield void'
  ).split(' '),
);

/** A JSON key: the string is followed by a colon. */
const BEFORE_COLON = /\s*:/y;

/** The text as coloured pieces; joined back, they are the text. */
export function tokenize(text: string, language: Language): Token[] {
  const grammar = grammarOf(language);
  const tokens: Token[] = [];
  const push = (kind: TokenKind, piece: string) => {
    const last = tokens.at(-1);
    if (kind === 'plain' && last?.kind === 'plain') last.text += piece;
    else tokens.push({ kind, text: piece });
  };
  while (grammar.lastIndex < text.length) {
    const match = grammar.exec(text)!;
    const [kind, piece] = Object.entries(match.groups!).find(([, value]) => value !== undefined) as [string, string];
    if (kind === 'word') {
      push(LITERALS[language].has(piece) ? 'literal' : language === 'javascript' && KEYWORDS.has(piece) ? 'keyword' : 'plain', piece);
    } else if (kind === 'string' && language === 'json') {
      BEFORE_COLON.lastIndex = grammar.lastIndex;
      push(BEFORE_COLON.test(text) ? 'key' : 'string', piece);
    } else {
      push(kind as TokenKind, piece);
    }
  }
  return tokens;
}

function Highlighted({ text, language }: { text: string; language: Language }) {
  return (
    <>
      {tokenize(text, language).map((token, index) =>
        token.kind === 'plain' ? token.text : (
          <span key={index} className={`code-${token.kind}`}>
            {token.text}
          </span>
        ),
      )}
    </>
  );
}

/** `line 3` in an error message ("TypeError: … (line 3, column 5)"), or undefined. */
export function lineOfMessage(message: string | null | undefined): number | undefined {
  const match = /\bline (\d+)/.exec(message ?? '');
  return match ? Number(match[1]) : undefined;
}

export function CodeEditor({
  id,
  value,
  onChange,
  language,
  rows = 10,
  placeholder,
  invalid,
  describedBy,
  errorLine,
}: {
  id: string;
  value: string;
  onChange(value: string): void;
  language: Language;
  rows?: number;
  placeholder?: string;
  invalid?: boolean;
  describedBy?: string;
  /** Marked in the line numbers: where the last error was. */
  errorLine?: number;
}) {
  const highlight = useRef<HTMLPreElement>(null);
  const gutter = useRef<HTMLPreElement>(null);
  const lines = value.split('\n').length;
  return (
    <div className={invalid ? 'code-editor invalid' : 'code-editor'}>
      <pre className="code-gutter" ref={gutter} aria-hidden="true">
        {Array.from({ length: lines }, (_, index) => (
          <span key={index} className={index + 1 === errorLine ? 'code-gutter-error' : undefined}>
            {index + 1}
            {'\n'}
          </span>
        ))}
      </pre>
      <div className="code-area">
        <pre className="code-highlight" ref={highlight} aria-hidden="true">
          <Highlighted text={value} language={language} />
          {/* A last empty line is drawn by the textarea: the <pre> needs a character on it. */}
          {'\n '}
        </pre>
        <textarea
          id={id}
          className="code-input"
          value={value}
          rows={rows}
          placeholder={placeholder}
          wrap="off"
          spellCheck={false}
          autoCapitalize="off"
          autoComplete="off"
          autoCorrect="off"
          aria-invalid={invalid || undefined}
          aria-describedby={describedBy}
          onChange={(event) => onChange(event.target.value)}
          onScroll={(event) => {
            const { scrollTop, scrollLeft } = event.currentTarget;
            if (highlight.current) Object.assign(highlight.current, { scrollTop, scrollLeft });
            if (gutter.current) gutter.current.scrollTop = scrollTop;
          }}
        />
      </div>
    </div>
  );
}

/** Code to read, highlighted as the editor shows it. */
export function CodeBlock({ code, language, label }: { code: string; language: Language; label: string }) {
  return (
    <pre className="code-block" role="group" aria-label={label} tabIndex={0}>
      <Highlighted text={code} language={language} />
    </pre>
  );
}
