"""Slurm's client (cloudvault/tools/slurm.py) on scontrol's and sacct's answers as Slurm prints them."""

from __future__ import annotations

import cloudvault.tools.slurm as client


def test_task_states_come_from_scontrol_and_from_sacct_only_where_scontrol_forgot(monkeypatch):
    answers = {
        "scontrol": "JobId=46 ArrayJobId=45 ArrayTaskId=2-3 JobState=PENDING Reason=Resources\n"
        "JobId=47 ArrayJobId=45 ArrayTaskId=1 JobState=RUNNING Reason=None\n",
        "sacct": "45_0|COMPLETED\n45_1|RUNNING\n45_[2-3]|PENDING\n",
    }
    monkeypatch.setattr(client, "run", lambda argv, **_: answers[argv[0]])
    assert client.job_states("45") == {2: "PENDING (Resources)", 3: "PENDING (Resources)", 1: "RUNNING", 0: "COMPLETED"}

    def no_accounting(argv, **_):
        if argv[0] == "sacct":  # what the test cluster says: accounting is off
            raise client.SlurmFailed(command="sacct", detail="Slurm accounting storage is disabled")
        return answers[argv[0]]

    monkeypatch.setattr(client, "run", no_accounting)
    assert client.job_states("45") == {2: "PENDING (Resources)", 3: "PENDING (Resources)", 1: "RUNNING"}
