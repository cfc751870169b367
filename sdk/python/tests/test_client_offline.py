"""The Python SDK without a daemon: envelope encoding, conversions, key files, timeouts."""

import os
import tempfile
import time
import unittest

import flatbuffers

import htam
from htam.client import PROTOCOL_VERSION, _root_pos
from htam.fb.Envelope import EnvelopeT
from htam.fb.Hello import HelloT
from htam.fb import Body


class OfflineTest(unittest.TestCase):
    def test_envelope_round_trip_and_to_dict(self):
        env = EnvelopeT()
        env.version = PROTOCOL_VERSION
        env.requestId = 77
        env.bodyType = Body.Body.Hello
        h = HelloT()
        h.client = "unit"
        h.clientVersion = "9"
        h.identitySecret = list(range(16))
        env.body = h
        b = flatbuffers.Builder(64)
        b.Finish(env.Pack(b), file_identifier=b"HTAM")
        buf = bytes(b.Output())
        self.assertEqual(buf[4:8], b"HTAM")
        back = EnvelopeT.InitFromBuf(buf, _root_pos(buf))
        self.assertEqual(back.requestId, 77)
        d = htam.to_dict(back.body)
        self.assertEqual(d, {"client": "unit", "client_version": "9",
                             "identity_secret": list(range(16))})

    def test_status_text_parses(self):
        parsed = htam.parse_status("# server\nversion: 1\nuptime_s: 3\n\n# memory\nrecords: 5\n")
        self.assertEqual(parsed["server"]["uptime_s"], "3")
        self.assertEqual(parsed["memory"]["records"], "5")

    def test_key_files(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "c.key")
            with open(p, "w") as f:
                f.write("# c\npublic = " + "a" * 40 + "\nsecret = " + "b" * 40 + "\n")
            k = htam.read_key_file(p)
            self.assertEqual(k["public"], "a" * 40)
            self.assertEqual(k["secret"], "b" * 40)
            with self.assertRaises(ValueError):
                htam.Client("ipc:///nonexistent", server_public_key="x", hello=False)

    def test_no_daemon_times_out_quickly(self):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.monotonic()
            with self.assertRaises(htam.HtamTimeout):
                htam.Client(f"ipc://{d}/nobody.sock", timeout_s=0.3, retries=1)
            self.assertLess(time.monotonic() - t0, 5.0)

    def test_enum_tables(self):
        self.assertEqual(htam.OUTCOME_NAMES[0], "Ok")
        self.assertIn("bestcandidates", htam.QUERY_KINDS)
        self.assertEqual(htam.BOTTLENECK_NAMES[1], "Memory")

    def test_bottleneck_values(self):
        from htam.fb.Bottleneck import Bottleneck
        self.assertEqual(htam.bottleneck_value(None), Bottleneck.Unknown)
        self.assertEqual(htam.bottleneck_value(""), Bottleneck.Unknown)
        self.assertEqual(htam.bottleneck_value("Memory"), Bottleneck.Memory)
        self.assertEqual(htam.bottleneck_value("compute"), Bottleneck.Compute)
        self.assertEqual(htam.bottleneck_value("latency-bound"), Bottleneck.Latency)
        self.assertEqual(htam.bottleneck_value(Bottleneck.Launch), Bottleneck.Launch)
        with self.assertRaises(ValueError):
            htam.bottleneck_value("io")
        with self.assertRaises(ValueError):
            htam.bottleneck_value(9)

    def test_next_step_carries_the_bottleneck(self):
        from htam.fb.NextStep import NextStepT
        sent = []
        c = htam.Client.__new__(htam.Client)  # no socket: the message is captured
        c._call = lambda m, body, *a, **k: sent.append(m) or NextStepT()
        c.next_step(5, bottleneck="Memory")
        c.next_step(6)
        self.assertEqual([(m.sessionId, m.bottleneck) for m in sent], [(5, 1), (6, 0)])
        # Encoded and read back, the field survives the wire format.
        b = flatbuffers.Builder(64)
        b.Finish(sent[0].Pack(b))
        back = NextStepT.InitFromBuf(bytes(b.Output()), _root_pos(bytes(b.Output())))
        self.assertEqual(back.bottleneck, 1)


if __name__ == "__main__":
    unittest.main()
