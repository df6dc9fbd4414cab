"""tests/lint/csource.py: what the lint and the size check share: C source with its comments and
string and character literals blanked (newlines kept, so line numbers stay), and the functions
found in it by brace matching at file scope (no C parser: sipp's sources are clang-formatted, so a
function's body is the brace block that follows a line ending in ')' or ') {')."""
import re


def blank(text):
    """The text with comments, string and character literals and preprocessor lines replaced by
    spaces; newlines are kept."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == '#':  # a preprocessor line, with its continuations
            j = i
            while j < n and text[j] != '\n':
                j += 2 if text[j] == '\\' and j + 1 < n else 1
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
            continue
        if c == '/' and i + 1 < n and text[i + 1] == '/':
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
            continue
        if c == '/' and i + 1 < n and text[i + 1] == '*':
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
            continue
        if c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(c + ' ' * (j - i - 2) + c if j - i >= 2 else ' ' * (j - i))
            i = j
            line_start = False
            continue
        out.append(c)
        if c == '\n':
            line_start = True
        elif not c.isspace():
            line_start = False
        i += 1
    return ''.join(out)


NAME_RE = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*\(')
KEYWORDS = {'if', 'for', 'while', 'switch', 'return', 'sizeof', 'do', 'else'}


def functions(text):
    """(name, first_line, lines, max_depth) of every function defined in the text. lines counts
    the body from its opening brace to its closing one; max_depth is the deepest brace nesting
    inside the body (the body itself is 0)."""
    src = blank(text)
    result = []
    depth = 0
    i, n = 0, len(src)
    line = 1
    while i < n:
        c = src[i]
        if c == '\n':
            line += 1
        elif c == '{' and depth == 0:
            head = src[max(0, i - 2000):i]
            # a function body: the text before the brace ends with ')' (and maybe attributes)
            stripped = head.rstrip()
            if stripped.endswith(')') and not re.search(r'=\s*$', stripped):
                # the function's name: the last identifier followed by '(' at parenthesis depth 0
                k = len(stripped) - 1
                par = 0
                while k >= 0:
                    if stripped[k] == ')':
                        par += 1
                    elif stripped[k] == '(':
                        par -= 1
                        if par == 0:
                            break
                    k -= 1
                m = re.search(r'([A-Za-z_][A-Za-z0-9_]*)\s*$', stripped[:max(k, 0)])
                name = m.group(1) if m else '?'
                start_line, d, maxd, j = line, 0, 0, i
                while j < n:
                    ch = src[j]
                    if ch == '\n':
                        line += 1
                    elif ch == '{':
                        d += 1
                        maxd = max(maxd, d)
                    elif ch == '}':
                        d -= 1
                        if d == 0:
                            break
                    j += 1
                if name not in KEYWORDS:
                    result.append((name, start_line, line - start_line + 1, maxd - 1))
                i = j + 1
                continue
            depth += 1
        elif c == '{':
            depth += 1
        elif c == '}':
            depth = max(0, depth - 1)
        i += 1
    return result
