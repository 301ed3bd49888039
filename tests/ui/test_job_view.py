"""How a page waits for pool work: light work draws in the same run, heavy work leaves a panel,
and work over the operator's limits is refused with a message before it starts."""

from streamlit.testing.v1 import AppTest


def page():
    import time

    import streamlit as st

    from models.cost import Cost
    from ui.widgets import job_view

    nonce = time.monotonic()  # a fresh key each run: nothing from an earlier run is stored

    def work(result):
        return lambda progress: (time.sleep(0.6), result)[1]

    light = job_view.run_job(
        ("light", nonce), "light work", work("light done"), cost=Cost(overhead_s=0.5), wait_s=0.05
    )
    heavy = job_view.run_job(
        ("heavy", nonce), "heavy work", work("heavy done"), cost=Cost(overhead_s=60), wait_s=0.05
    )
    st.write(f"light: {light}; heavy: {'still running' if heavy is job_view.MISSING else heavy}")


def test_light_work_is_waited_for_and_heavy_work_shows_progress():
    at = AppTest.from_function(page, default_timeout=30).run()
    assert not at.exception
    assert [m.value for m in at.markdown] == ["light: light done; heavy: still running"]
    assert any("heavy work" in bar.proto.text for bar in at.get("progress"))
    assert [b.label for b in at.button] == ["Cancel"]


def refused():
    import streamlit as st

    from models.cost import Cost
    from models.errors import UserError
    from ui.widgets import job_view

    try:
        job_view.run_job(
            ("huge",),
            "Scoring a huge batch",
            lambda p: 1,
            cost=Cost(overhead_s=1, peak_bytes=1 << 50),
        )
    except UserError as err:
        st.error(str(err))


def test_work_that_would_not_fit_gets_a_message_not_a_crash():
    at = AppTest.from_function(refused, default_timeout=30).run()
    assert not at.exception
    assert "GiB of memory" in at.error[0].value


def streamed():
    import time

    import streamlit as st

    from models.cost import Cost
    from ui.runtime.jobs import Partial
    from ui.widgets import job_view

    nonce, partial = time.monotonic(), Partial()
    partial.update("**not bold** <b>nor this</b> [link](https://evil.example)")  # written so far

    def work(progress):
        time.sleep(3)
        return "finished"

    found = job_view.run_job(
        ("stream", nonce), "writing", work, cost=Cost(overhead_s=0.5), wait_s=0.05, partial=partial
    )
    st.write("still running" if found is job_view.MISSING else found)


def test_streamed_work_shows_its_text_so_far_as_text_in_the_panel():
    """Light streaming work shows its panel (not a spinner) and the text it has so far, shown
    as code: markdown and HTML in it stay literal."""
    at = AppTest.from_function(streamed, default_timeout=30).run()
    assert not at.exception
    assert [m.value for m in at.markdown] == ["still running"]
    assert [c.value for c in at.code] == [
        "**not bold** <b>nor this</b> [link](https://evil.example)"
    ]
    assert [b.label for b in at.button] == ["Cancel"]


def background_page():
    import threading

    import streamlit as st

    from models.cost import Cost
    from ui.widgets import job_view

    gate = st.session_state.setdefault("gate", threading.Event())  # the work ends when told
    found = job_view.run_job(
        ("background",),
        "a caption's measurement",
        lambda progress: (gate.wait(30), "measured")[1],
        cost=Cost(overhead_s=0.1),
        wait_s=30,
        background="Measuring…",
    )
    st.write(f"view drawn; caption: {'pending' if found is job_view.MISSING else found}")


def test_background_work_never_holds_up_the_view():
    """Light work the page waits for up to 30 s, marked as background, is not waited for: the
    view draws with a one-line note, and the result shows in the run after it has finished."""
    at = AppTest.from_function(background_page, default_timeout=10).run()
    assert not at.exception
    assert [m.value for m in at.markdown] == ["view drawn; caption: pending"]
    assert [c.value for c in at.caption] == ["Measuring…"] and not at.get("progress")
    at.session_state["gate"].set()
    from ui.runtime import server

    job = server.current().pool.get(("background",))
    if job is not None:
        job.future.result(timeout=10)
    at.run()
    assert [m.value for m in at.markdown] == ["view drawn; caption: measured"]
    assert not at.caption
