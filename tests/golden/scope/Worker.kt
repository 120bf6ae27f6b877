package jobs

class Worker(private val queue: Queue) {
    fun run(limit: Int): Int {
        var done = 0
        while (done < limit) {
            val job = queue.take() ?: break
            if (job.expired) {
                continue
            }
            job.execute()
            done += 1
        }
        return done
    }
}
