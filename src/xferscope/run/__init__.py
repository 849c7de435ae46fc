"""One run of one spec: its engine in a process of its own (``runner.EngineRun`` here, ``engine_process`` there,
``local_run`` driving the engine), the pool that keeps an engine process for the next run, and the files several
runs share (``dataset``, ``scratch``)."""
