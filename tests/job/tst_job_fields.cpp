// The public job field table against the code that reads, writes and validates job files: every
// field is in the table with the type and default the schema reads and writes (and round-trips
// through a job file), every choice list is the one validation enforces, and "used when" agrees
// with validation (a field set where the table says it is unused is reported as unused, and not
// where it says it is used).
#include <QtTest>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "engine/job/job_fields.h"
#include "engine/job/job_spec.h"
#include "engine/optim/optimizer.h"

using namespace shardlab;
using nlohmann::json;

namespace {

json::json_pointer pointer(const std::string& dotted) {
  std::string s = "/" + dotted;
  for (char& c : s)
    if (c == '.') c = '/';
  return json::json_pointer(s);
}

// A value of the field's type that differs from its default (a listed choice where it has some).
json other_value(const JobField& f) {
  const json& d = f.default_value;
  switch (f.type) {
    case FieldType::string:
      for (const auto& c : f.choices)
        if (c != d.get<std::string>()) return c;
      return d.get<std::string>() + "x";
    case FieldType::boolean:
      return !d.get<bool>();
    case FieldType::number:
      return d.get<double>() + 0.5;
    case FieldType::integer:
      return d.get<int64_t>() + 1;
    case FieldType::unsigned_integer:
      return d.get<uint64_t>() + 1;
    case FieldType::integer_list:
      return json::array({3, 5});
    case FieldType::string_list:
      return json::array({"a.txt"});
  }
  return nullptr;
}

// The errors validation reports at exactly `path`.
std::vector<FieldError> errors_at(const json& doc, const std::string& path) {
  std::vector<FieldError> out;
  for (auto& e : check_job_json(doc))
    if (e.field == path) out.push_back(e);
  return out;
}

bool says_unused(const std::vector<FieldError>& errors) {
  for (const auto& e : errors)
    if (e.message.find("not used") != std::string::npos ||
        e.message.find("only used") != std::string::npos)
      return true;
  return false;
}

// Documents that give the field deciding `t` each value that matters to it.
std::vector<json> deciding_documents(const FieldTest& t) {
  const JobField* decider = find_job_field(t.path);
  std::vector<json> values;
  switch (t.op) {
    case FieldTest::Op::above:
      values = {t.threshold, t.threshold + 1};
      break;
    case FieldTest::Op::not_empty:
      values = {"", "somewhere:1"};
      break;
    default:
      for (const auto& c : decider->choices) values.push_back(c);
  }
  std::vector<json> docs;
  for (const json& v : values) {
    json doc = json::object();
    doc[pointer(t.path)] = v;
    docs.push_back(doc);
  }
  return docs;
}

}  // namespace

class TestJobFields : public QObject {
  Q_OBJECT

 private slots:
  void tableCoversEveryKeyWithItsDefault() {
    const json defaults = job_to_json(JobSpec{});
    std::set<std::string> listed;
    for (const JobField& f : job_fields()) {
      QVERIFY2(listed.insert(f.path).second, f.path.c_str());
      QVERIFY2(defaults.contains(pointer(f.path)), f.path.c_str());
      QCOMPARE(defaults.at(pointer(f.path)), f.default_value);
      QVERIFY(find_job_field(f.path) == &f);
    }
    // Every leaf of the full document is a field of the table.
    const json flat = defaults.flatten();
    for (const auto& item : flat.items()) {
      std::string path = item.key().substr(1);
      for (char& c : path)
        if (c == '/') c = '.';
      // An array's elements flatten to "a/b/0": the field is the array.
      while (!listed.count(path) && path.find('.') != std::string::npos)
        path = path.substr(0, path.rfind('.'));
      QVERIFY2(listed.count(path), item.key().c_str());
    }
    QVERIFY(find_job_field("optimizer.lrr") == nullptr);
  }

  void everyFieldRoundTripsThroughAJobFile() {
    for (const JobField& f : job_fields()) {
      json doc = json::object();
      const json value = other_value(f);
      doc[pointer(f.path)] = value;
      JobSpec job;
      for (const auto& e : check_job_json(doc, &job))
        QVERIFY2(e.field != f.path || (e.message.rfind("unknown field", 0) != 0 &&
                                       e.message.rfind("expected a", 0) != 0 &&
                                       e.message.rfind("expected true", 0) != 0),
                 qPrintable(QString::fromStdString(e.to_string())));
      QCOMPARE(job_to_json(job).at(pointer(f.path)), value);
      // And through the text of a saved file.
      QTemporaryDir dir;
      const std::string path = dir.filePath("job.json").toStdString();
      save_job(job, path);
      JobSpec back;
      check_job_json(read_job_json(path), &back);
      QCOMPARE(job_to_json(back).at(pointer(f.path)), value);
    }
  }

  void choicesAreTheOnesValidationAccepts() {
    int with_choices = 0;
    for (const JobField& f : job_fields()) {
      if (f.choices.empty()) continue;
      ++with_choices;
      QCOMPARE(f.type, FieldType::string);
      for (const auto& c : f.choices) {
        json doc = json::object();
        doc[pointer(f.path)] = c;
        for (const auto& e : errors_at(doc, f.path))
          QVERIFY2(e.message.find("must be one of") == std::string::npos, e.message.c_str());
      }
      json doc = json::object();
      doc[pointer(f.path)] = "no-such-choice";
      const auto errors = errors_at(doc, f.path);
      QVERIFY2(errors.size() == 1, f.path.c_str());
      std::string listed, known;
      for (const auto& c : f.choices) {
        listed += (listed.empty() ? "\"" : ", \"") + c + "\"";
        known += (known.empty() ? "" : ", ") + c;
      }
      if (f.path == "optimizer.name") {  // the optimizer module's own message
        QCOMPARE(errors[0].message, "unknown optimizer 'no-such-choice' (known: " + known + ")");
        continue;
      }
      QVERIFY2(errors[0].message == "must be one of " + listed + ", got \"no-such-choice\"",
               qPrintable(QString::fromStdString(f.path + ": " + errors[0].message)));
    }
    QVERIFY(with_choices >= 8);
    QCOMPARE(field_choices("optimizer.name"), optimizer_names());
    QVERIFY(field_choices("train.steps").empty());
  }

  void usedWhenAgreesWithValidation() {
    int unused_seen = 0, used_seen = 0;
    for (const JobField& f : job_fields()) {
      for (const FieldTest& t : f.used_when) {
        for (json doc : deciding_documents(t)) {
          const bool used = field_used(f, doc);
          doc[pointer(f.path)] = other_value(f);
          const bool reported = says_unused(errors_at(doc, f.path));
          QVERIFY2(reported == !used, qPrintable(QString("%1 with %2: table says %3")
                                                     .arg(f.path.c_str(), doc.dump().c_str(),
                                                          used ? "used" : "unused")));
          (used ? used_seen : unused_seen)++;
        }
      }
    }
    QVERIFY(unused_seen >= 20 && used_seen >= 20);
  }

  void usedWhenReadsMistypedValuesAsDefaults() {
    const JobField* beta1 = find_job_field("optimizer.beta1");
    QVERIFY(beta1);
    QVERIFY(field_used(*beta1, json::object()));  // the default optimizer, adam, reads it
    QVERIFY(field_used(*beta1, json::parse(R"({"optimizer": {"name": 3}})")));
    QVERIFY(!field_used(*beta1, json::parse(R"({"optimizer": {"name": "sgd"}})")));
    const JobField* micro = find_job_field("parallel.micro_batches");
    QVERIFY(!field_used(*micro, json::parse(R"({"parallel": {"pp": "2"}})")));
    QVERIFY(field_used(*micro, json::parse(R"({"parallel": {"tp": 2.5}})")));
  }
};

QTEST_APPLESS_MAIN(TestJobFields)
#include "tst_job_fields.moc"
