"""The pool of forked workers: numpy's BLAS on one thread in each."""

from threadpoolctl import threadpool_info

from normstats.engine.process_pool import process_pool


def test_pool_workers_run_blas_on_one_thread():
    """Two workers each running BLAS on two threads would share two cores four ways."""
    with process_pool(2) as pool:
        infos = [pool.submit(threadpool_info).result() for _ in range(4)]
    blas = [lib for info in infos for lib in info if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] == 1 for lib in blas)
