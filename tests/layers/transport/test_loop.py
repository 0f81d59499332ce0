"""layers/transport/loop.py: the running loop, remembered per thread, never a stale one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest
import uvloop

from hopline.layers.transport.loop import current_task, running_loop


def test_it_is_the_running_loop_in_each_of_several_loops_one_after_another():
    seen = []

    async def look() -> None:
        assert running_loop() is asyncio.get_running_loop()
        assert current_task() is asyncio.current_task()
        seen.append(running_loop())

    asyncio.run(look())
    uvloop.run(look())  # a new loop in the same thread: the first one no longer runs
    asyncio.run(look())
    assert len({id(loop) for loop in seen}) == 3


def test_outside_a_loop_it_raises_as_asyncio_does():
    async def nothing() -> None:
        running_loop()

    asyncio.run(nothing())  # remembered ...
    with pytest.raises(RuntimeError):
        running_loop()  # ... but that loop has stopped


def test_threads_each_get_their_own():
    found: dict[str, bool] = {}

    def in_thread(name: str) -> None:
        async def look() -> None:
            for _ in range(3):
                found[name] = running_loop() is asyncio.get_running_loop()
                await asyncio.sleep(0.01)

        asyncio.run(look())

    threads = [threading.Thread(target=in_thread, args=(str(n),)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert found == {str(n): True for n in range(4)}


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 keeps the loop on the thread state: nothing to save")
def test_it_makes_no_getpid_system_call(tmp_path):
    script = tmp_path / "looks.py"
    script.write_text(
        "import asyncio\n"
        "from hopline.layers.transport.loop import running_loop, current_task\n"
        "async def main():\n"
        "    for _ in range(5000):\n"
        "        running_loop(); current_task()\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run(
        ["strace", "-f", "-c", "-e", "trace=getpid", sys.executable, str(script)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    calls = [int(line.split()[3]) for line in out.stderr.splitlines() if line.rstrip().endswith("getpid")]
    assert sum(calls) < 100, out.stderr  # 10000 looks; asyncio.get_running_loop() would make 10000
