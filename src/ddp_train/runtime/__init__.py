"""This process in the job: its start-up, threads, how it joins the process group, the rendezvous round's store."""
