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


# What opens a block whose contents are at file scope (extern "C"'s literal is blanked to " "), and the
# qualifiers a C++ method may carry between its parameters and its body.
SCOPE_HEAD = re.compile(r'(?:\bnamespace(?:\s+[A-Za-z_][A-Za-z0-9_:]*)?|\bextern\s*"[^"\n]*")\s*$')
QUALIFIERS = ('const', 'noexcept', 'override', 'final')


def strip_qualifiers(head):
    """head without the C++ qualifiers it ends with (a regex anchored at $ would scan the whole head)."""
    while True:
        for q in QUALIFIERS:
            if head.endswith(q) and not (head[-len(q) - 1:-len(q)].isalnum() or head[-len(q) - 1:-len(q)] == '_'):
                head = head[:-len(q)].rstrip()
                break
        else:
            return head


def function_name(head):
    """The name of the function whose body opens after head, or None when head is no function's
    (the text before the brace ends with ')', and maybe attributes or a C++ method's qualifiers)."""
    stripped = strip_qualifiers(head.rstrip())
    if not stripped.endswith(')') or re.search(r'=\s*$', stripped):
        return None
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
    return m.group(1) if m else '?'


BRACE = re.compile(r'[{}]')


def functions(text, blanked=False):
    """(name, first_line, lines, max_depth) of every function defined in the text (blanked: the text
    is blank()'s already). lines counts the body from its opening brace to its closing one; max_depth
    is the deepest brace nesting inside the body (the body itself is 0)."""
    src = text if blanked else blank(text)
    result = []
    depth = 0
    open_scopes = 0  # C++'s namespace and extern "C" blocks: their functions count as file scope
    body = None  # inside a function: [name, start, first_line, depth, max_depth]
    for m in BRACE.finditer(src):
        i, c = m.start(), m.group()
        if body:
            body[3] += 1 if c == '{' else -1
            body[4] = max(body[4], body[3])
            if body[3] == 0:
                first = src.count('\n', 0, body[1]) + 1
                if body[0] not in KEYWORDS:
                    result.append((body[0], first, src.count('\n', body[1], i) + 1, body[4] - 1))
                body = None
        elif c == '{' and depth == 0 and SCOPE_HEAD.search(src[max(0, i - 200):i]):
            open_scopes += 1
        elif c == '}' and depth == 0 and open_scopes:
            open_scopes -= 1
        elif c == '{' and depth == 0 and (name := function_name(src[max(0, i - 2000):i])):
            body = [name, i, 0, 1, 1]
        elif c == '{':
            depth += 1
        else:
            depth = max(0, depth - 1)
    return result
