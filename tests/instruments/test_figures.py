"""Every figure of the course can be read on a projector: 1200 px wide or more at 100 dpi, no text
box over another, no text off the canvas (`kernellab.show.plots.layout_problems`), drawn from the
recorded H200 data as the tour draws them in the simulator; and the checker itself finds what it
should and nothing else."""

from pathlib import Path

import pytest

from kernellab.course import bench, protocol, target
from kernellab.gpu.timeline import SHARED_AXIS_RATIO, Span, TimelineData, plot_gantts
from kernellab.show import plots


@pytest.fixture(scope="module")
def course_figures(tmp_path_factory):
    """{figure name: (the figure, its layout problems)} for each lab's declared figures and each
    of its recorded benchmarks' bench figures, drawn once from the recorded data, with the names
    the labs declare. A figure is checked as `save` leaves it, then closed unwritten: the check
    draws it once, and a PNG would cost a second drawing for nothing."""
    folder = tmp_path_factory.mktemp("figures")
    drawn, declared_names = {}, []

    def check_instead_of_saving(fig, name, figures_dir=None):
        drawn[name] = (fig, plots.layout_problems(fig))
        plots.plt.close(fig)
        return Path(figures_dir or plots.FIGURES) / f"{name}.png"

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "save", check_instead_of_saving)
        for number in sorted(target.labs()):
            declared = protocol.declaration(number)
            lab = target.load(number, "solutions")
            records = protocol.recorded(declared)
            protocol.draw(declared, lab, records, folder)
            declared_names += [figure.name for figure in declared.figures
                               if all(name in records for name in figure.needs)]
            for benchmark in declared.benchmarks(lab, None):
                if benchmark.name in records:
                    declared_names.append(bench.draw(records[benchmark.name], number, folder).stem)
    return drawn, declared_names


def test_every_figure_of_every_lab_is_readable(course_figures):
    """Wide enough, nothing overlapping, nothing off the canvas, in every figure the tour, the
    bench and the notebooks draw from the labs' declarations."""
    drawn, declared_names = course_figures
    assert set(declared_names) == set(drawn) and len(drawn) >= 40
    unreadable = {name: problems for name, (_, problems) in drawn.items() if problems}
    assert not unreadable, "\n".join(f"{name}: {'; '.join(problems)}" for name, problems in unreadable.items())


def test_roofline_labels_its_points_by_lab_and_names_them_in_a_table(course_figures):
    """Lab 09's roofline: "02a", "02b" where a lab has several points, "07" where it has one, and
    beside it a table row per label with the kernel's name and its % of the roof."""
    experiment = protocol.experiment("09")
    points = experiment.roofline_points(target.load("09", "solutions"), own=protocol.recorded(experiment.LAB))
    ids = experiment.point_ids(points)
    fig, _ = course_figures[0]["lab09_roofline"]
    roofline, table_axes, _ = fig.axes
    assert sorted(note.get_text() for note in roofline.texts) == sorted(ids)
    rows = {}
    for (row, column), cell in table_axes.tables[0].get_celld().items():
        rows.setdefault(row, {})[column] = cell.get_text().get_text()
    assert [rows[i + 1] for i in range(len(points))] == [
        {0: label, 1: p["name"].split(" ", 1)[1], 2: f"{p['pct_of_roof']:.0f}%"} for label, p in zip(ids, points)]
    assert not roofline.get_legend()


def test_point_ids_letter_only_the_labs_with_several_points():
    experiment = protocol.experiment("09")
    assert experiment.point_ids([{"lab": lab} for lab in ("00", "02", "02", "07", "09", "09")]) == [
        "00", "02a", "02b", "07", "09a", "09b"]


def blank_figure():
    fig, ((ax,),) = plots.figure(plots.MIN_WIDTH_IN, 4)
    ax.axis("off")
    return fig


def test_checker_reports_overlapping_text_off_canvas_text_and_a_narrow_canvas():
    fig = blank_figure()
    fig.text(0.5, 0.5, "first label")
    fig.text(0.51, 0.505, "second label")
    fig.text(0.98, 0.2, "runs off the right edge")
    problems = plots.layout_problems(fig)
    assert any("'first label' overlaps 'second label'" in p for p in problems), problems
    assert any("'runs off the right edge' leaves the canvas" in p for p in problems), problems
    assert len(problems) == 2
    assert plots.layout_problems(plots.plt.figure(figsize=(6.6, 4.4), dpi=plots.DPI)) == [
        "the figure is 660 px wide at 100 dpi, under 1200"]
    plots.plt.close("all")


def test_checker_sees_a_text_of_several_lines():
    """matplotlib draws each line of a multi-line text without naming the text: Lab 08's title ran
    off both edges unseen (review 12, 08-M2)."""
    fig = blank_figure()
    fig.text(0.97, 0.5, "a first line\nand a second one that runs off the right edge")
    assert any("leaves the canvas" in p for p in plots.layout_problems(fig))
    plots.plt.close("all")


def test_checker_uses_a_slanted_label_s_own_box_not_its_upright_extent():
    """Two parallel labels at 45 degrees, 60 px apart: their upright extents overlap, their
    glyphs do not, and rotated into each other they do."""
    fig = blank_figure()
    for x in (0.4, 0.45):
        fig.text(x, 0.5, "a long slanted tick label", rotation=45)
    assert plots.layout_problems(fig) == []
    fig.texts[1].set_rotation(-45)
    assert len(plots.layout_problems(fig)) == 1
    plots.plt.close("all")


def test_label_points_keeps_labels_of_crowded_points_apart():
    fig, ((ax,),) = plots.figure(plots.MIN_WIDTH_IN, 6)
    points = [(1.0, 1.0), (1.02, 1.0), (1.0, 1.03), (1.03, 1.02), (2.0, 2.0)]
    ax.plot(*zip(*points), "o")
    ax.set_xlim(0.7, 3)             # no tick at the corner, where the two axes' first labels meet
    ax.set_ylim(0.7, 3)
    notes = plots.label_points(ax, points, ["02a", "02b", "05a", "05b", "09"])
    assert [n.get_text() for n in notes] == ["02a", "02b", "05a", "05b", "09"]
    assert plots.layout_problems(fig) == []
    plots.plt.close(fig)


def timeline(makespan_ms: float, source: str) -> TimelineData:
    return TimelineData((Span("k", "s1", "kernel", 0.0, makespan_ms),), ("s1",), source)


@pytest.mark.parametrize("ratio", [SHARED_AXIS_RATIO * 0.9, SHARED_AXIS_RATIO * 4])
def test_timelines_side_by_side_share_a_time_axis_only_when_their_lengths_compare(ratio):
    """Lab 07's pageable and pinned pipelines: one axis while the makespans are close, each its
    own when one is many times the other; each title keeps its own makespan."""
    fig, (axes,) = plots.figure(2 * plots.PANEL_WIDTH_IN, 4, ncols=2)
    plot_gantts(axes, [timeline(10.0 * ratio, "long"), timeline(10.0, "short")])
    long_end, short_end = (ax.get_xlim()[1] for ax in axes)
    assert (long_end == short_end) == (ratio <= SHARED_AXIS_RATIO)
    assert short_end == pytest.approx(10.0 * (1.02 if ratio > SHARED_AXIS_RATIO else 1.02 * ratio))
    assert [ax.get_title() for ax in axes] == [f"long: {10.0 * ratio:.3g} ms", "short: 10 ms"]
    plots.plt.close(fig)
