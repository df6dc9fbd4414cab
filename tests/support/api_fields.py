"""docs/api-fields.md's rows for the routes whose rows their own tests check (rerank, tokenize,
detokenize): `check_rows` sends each row's example merged into a valid request and checks the
decision: refused is a 400 naming the field, ignored a 200 naming it in sipp-ignored, honored a 200
that does not."""

import os

from tests.support.paths import ROOT

TABLE = os.path.join(ROOT, "docs", "api-fields.md")


def field_rows(api):
    """The rows of api: (field, decision)."""
    rows = []
    with open(TABLE) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 5 and cells[0] == api:
                rows.append((cells[1], cells[2]))
    return rows


def check_rows(test, g, api, path, base, examples, headers=None):
    """Checks every row of api against gateway g: base is a valid body, examples maps each field to
    what is merged into it (every row needs one, and every example a row); headers go with each."""
    rows = field_rows(api)
    test.assertEqual({f for f, _ in rows}, set(examples), f"{api}: the rows and the examples differ")
    for field, decision in rows:
        with test.subTest(api=api, field=field, decision=decision):
            st, h, out = g.json("POST", path, {**base, **examples[field]}, headers=headers)
            named = [n.strip() for n in (h.get("sipp-ignored") or "").split(",") if n.strip()]
            if decision == "refused":
                test.assertEqual(st, 400, out)
                test.assertIn(f"'{field}'", out["error"]["message"])
            else:
                test.assertEqual(st, 200, out)
                test.assertEqual(field in named, decision == "ignored", named)
