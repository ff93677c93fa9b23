"""Tables printed whole (`Whole`): every figure on one line and every word whole at any width, in parts where they
must; the console `commands.common.console` prints every rich table so."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any


class Whole:
    """A rich table printed with every figure and word whole, however narrow the screen. rich shrinks a table too
    wide by cutting its widest columns short ("$0.092…"); here a numeric column (right-justified, or no_wrap) keeps
    each cell on one line and a text column is never narrower than its longest word (it wraps between words). Where
    even that is too wide, the table is printed in parts, each repeating the row's key columns (the leading text
    columns) with as many of the others, in order, as fit; in a part still too wide its text columns fold their
    longest words (a path) to the room the figures leave, and where the figures alone are wider than the screen the
    part is printed wider (the terminal wraps its lines; a file or a pipe keeps them), never a figure folded, never
    an ellipsis. A table rich lays out with every figure and word whole is printed as rich prints it."""

    def __init__(self, table: Any):
        self.table = table

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement.get(console, options, self.table)

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        try:
            parts = self._parts(console, options)
        except (AttributeError, TypeError):  # a rich whose Table lacks the private measures read here: as rich prints
            parts = [self.table]
        yield from parts

    def _parts(self, console: Any, options: Any) -> list[Any]:
        table, width = self.table, options.max_width
        needs = [_column_need(table, console, options, c) for c in table.columns]
        laid_out = table._calculate_column_widths(console, options.update_width(width - table._extra_width))
        if all(w >= need for w, need in zip(laid_out, needs, strict=True)):
            return [table]  # rich's own layout keeps every figure and word whole
        full = [table._measure_column(console, options, c).maximum for c in table.columns]
        least = [_column_least(table, console, options, c, need) for c, need in zip(table.columns, needs, strict=True)]
        groups = _column_groups(table, needs, width)
        return [
            *(_sized(_part(table, group, first=n == 0, last=n == len(groups) - 1), [needs[i] for i in group],
                     [full[i] for i in group], [least[i] for i in group], width)
              for n, group in enumerate(groups)),
            *_shared(table, groups),
        ]  # fmt: skip


def _shared(table: Any, groups: list[list[int]]) -> list[Any]:
    """The line saying what the key columns left out of every part hold, the same on every row ("all rows: framework
    torch"): at 40 columns `table --best` lost its workload column, said nowhere."""
    from rich.text import Text

    kept = {i for group in groups for i in group}
    said = [f"{_plain(c.header)} {_plain(c._cells[0])}" for i, c in enumerate(table.columns)
            if i not in kept and c._cells and _plain(c._cells[0]).strip()]  # fmt: skip
    return [Text(f"all rows: {', '.join(said)}")] if said else []


def _plain(cell: Any) -> str:
    """A cell's text as printed: a str cell is rich markup (`net\\[a-rather-long-name]` printed as
    `net[a-rather-long-name]`: "all rows:" showed the escape)."""
    from rich.text import Text

    return Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)


def _column_need(table: Any, console: Any, options: Any, column: Any) -> int:
    """The least width of a column with every figure and word whole, its padding included: a numeric column's
    widest cell, a text column's longest word (a header's words may wrap, each whole)."""
    from rich.measure import Measurement

    one_line = column.justify == "right" or column.no_wrap
    options = options.update_width(1 << 16)  # a figure wider than the screen measured whole, not at the screen's width
    head = Measurement.get(console, options, column.header).minimum if table.show_header else 0
    cells = [Measurement.get(console, options, cell) for cell in column._cells]
    widest = max([m.maximum if one_line else m.minimum for m in cells], default=0)
    return max(head, widest, column.min_width or 0) + table._get_padding_width(column._index)


def _column_least(table: Any, console: Any, options: Any, column: Any, need: int) -> int:
    """The least width of a column in a part too wide for the screen with every word whole: a figure column's need
    (a number, a price, a name kept on one line: never folded), a text column's header's longest word, its cells
    folded (a store's path, `examples/my_model.py:make`: a whole table went wider than the screen for them)."""
    from rich.measure import Measurement

    if column.justify == "right" or column.no_wrap:
        return need
    head = Measurement.get(console, options, column.header).minimum if table.show_header else 1
    return min(max(head, column.min_width or 0, 1) + table._get_padding_width(column._index), need)


def _fold_text(widths: list[int], least: list[int], over: int) -> int:
    """Narrows the widest of the columns above their `least` a column at a time until the part is `over` no more;
    what it is still over (its figure columns alone wider than the screen)."""
    while over > 0 and (narrower := [i for i, w in enumerate(widths) if w > least[i]]):
        widths[max(narrower, key=lambda i: widths[i])] -= 1
        over -= 1
    return over


def _tell_apart(columns: list[Any], keys: list[int]) -> bool:
    """Whether the cells of the columns `keys` differ on every two rows."""
    rows = list(zip(*([str(c) for c in columns[i]._cells] for i in keys), strict=True))
    return bool(keys) and len(set(rows)) == len(rows)


def _column_groups(table: Any, needs: list[int], width: int) -> list[list[int]]:
    """The columns of each part: the key columns, then the others in order, in as few parts as fit beside them,
    as even as can be (no part of one lone column where two could be shared)."""
    columns = table.columns
    keys = 1
    while keys < len(columns) and columns[keys - 1].justify != "right" and columns[keys].justify != "right":
        keys += 1
    if columns[0].justify == "right" or keys == len(columns):
        keys = 1 if len(columns) > 1 else 0
    border = 1 if table.box else 0
    edges = 2 * border if table.show_edge else 0
    widest = max(needs[keys:], default=0)
    kept, moved = list(range(keys)), []
    while len(kept) > 1 and sum(needs[i] for i in kept) + widest + edges + len(kept) * border > width:
        # fewer key columns, so that each other column fits beside them: first one that is the same on every row
        # (a compare at 80 columns dropped the mode and kept the framework, torch throughout: two rows read alike).
        # One that tells rows apart is not dropped but printed in a part (predict --memory at 40 columns had its
        # verdict, "does not fit (needs 4.9 GiB of 3.5 GiB)", in none), the figures kept whole
        same = [i for i in kept if len({str(c) for c in columns[i]._cells}) <= 1]
        if same:
            kept.remove(same[-1])
        elif _tell_apart(columns, kept[:-1]):  # the others still tell each row apart in every part
            moved.insert(0, kept.pop())
        else:  # kept, its cells folding: a part whose rows read alike is no part (the mode in one part alone)
            break
    room = width - sum(needs[i] for i in kept) - edges - (len(kept) - 1) * border
    rest = [*moved, *range(keys, len(columns))]
    others = [needs[i] + border for i in rest]
    cuts = _even_cuts(others, room)
    return [[*kept, *rest[a:b]] for a, b in itertools.pairwise([0, *cuts, len(others)])]


def _even_cuts(widths: list[int], room: int) -> list[int]:
    """Where to cut `widths` into the fewest runs that each fit in `room` (one wider is a run of its own), the
    widest run as narrow as can be: the narrowest limit that packs them, greedily, into no more runs."""

    def packed(limit: int) -> list[int]:
        cuts, run = [], 0
        for i, w in enumerate(widths):
            if run and run + w > limit:
                cuts.append(i)
                run = 0
            run += w
        return cuts

    fewest = len(packed(room))
    low, high = max(min(widths, default=0), 1), max(room, 1)
    while low < high:  # the narrowest limit that needs no more runs than `room` itself
        middle = (low + high) // 2
        low, high = (low, middle) if len(packed(middle)) <= fewest else (middle + 1, high)
    return packed(low)


def _part(table: Any, group: list[int], first: bool, last: bool) -> Any:
    """`table` with the columns `group` only (the whole table when it is all of them)."""
    import copy
    import dataclasses

    if len(group) == len(table.columns):
        return table
    part = copy.copy(table)
    part.columns = [dataclasses.replace(table.columns[i], _index=n) for n, i in enumerate(group)]
    if not first:
        part.title = f"{table.title} (continued)" if isinstance(table.title, str) else table.title
    if not last:
        part.caption = None
    return part


def _sized(table: Any, needs: list[int], full: list[int], least: list[int], width: int) -> Any:
    """`table` with each column's width set: its need, then the room left given to the columns short of their
    widest cell, the shortest shortfall first (the fewest cells wrap); every column folds rather than cut a word.
    Where the needs are too wide, the text columns are narrowed, down to their `least`, and fold their words."""
    import copy
    import dataclasses

    room, widths = max(width - table._extra_width - sum(needs), 0), list(needs)
    over = _fold_text(widths, least, table._extra_width + sum(needs) - width)
    for i in sorted(range(len(widths)), key=lambda i: full[i] - needs[i]):
        more = min(max(full[i] - needs[i], 0), room)
        widths[i] += more
        room -= more
    sized = copy.copy(table)
    sized.columns = [
        dataclasses.replace(c, width=w - table._get_padding_width(c._index), overflow="fold", no_wrap=False)
        for c, w in zip(table.columns, widths, strict=True)
    ]
    # the figure columns beside the keys are wider than the screen: the part is wider too, rather than fold a figure
    # or a name ("$0.00100-$0.0" over "0137"); the terminal wraps its lines, a file or a pipe keeps them whole
    return sized if over <= 0 else _Wider(sized, width + over)


class _Wider:
    """A table rendered `width` columns wide, wider than the console."""

    def __init__(self, table: Any, width: int):
        self.table, self.width = table, width

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        yield from console.render(self.table, options.update_width(self.width))
