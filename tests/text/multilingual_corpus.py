# ruff: noqa: RUF001  (the texts are in other scripts on purpose)
"""A small labelled multilingual set for the content stage, written for these tests.

For each language, three texts on one topic (a city's new tram line, a bakery, a
rainy week): different texts that share vocabulary, as pages of one site do.
:func:`near_pairs` derives near duplicates from them with a seeded RNG, the
way the same page differs between two fetches; :func:`distinct_pairs` pairs
different texts of one language.

Chinese, Japanese and Thai are written without spaces between words (edits
are counted in characters there); French, Russian, Arabic and Korean separate
words with spaces (edits are counted in words).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import combinations

__all__ = ["NO_SPACES", "TEXTS", "Pair", "distinct_pairs", "near_pairs"]

TEXTS: dict[str, tuple[str, ...]] = {
    "zh": (
        "本市新建的有轨电车线路昨天正式通车，全长十八公里，共设二十四个车站，从火车站一直通到大学城。"
        "市交通局表示，早晚高峰期间每六分钟一班，平时每十分钟一班，票价与公交车相同。"
        "通车第一天，许多市民带着孩子前来乘坐，车厢里十分热闹。一位退休教师说，"
        "以前去城东看病要换两次公交车，现在坐电车半个小时就到了。"
        "沿线的商店老板也很高兴，他们希望客流增加以后生意能好起来。"
        "交通局提醒乘客注意安全，不要在车门关闭时强行上下车。",
        "老街拐角的那家面包店已经开了三十年，每天清晨五点，店里的灯就亮了。"
        "店主姓王，他说做面包最重要的是耐心，面团要慢慢发酵，急不得。"
        "店里最受欢迎的是红豆面包和葱油花卷，常常不到中午就卖完了。"
        "附近的居民几乎每天都来，有的老顾客从小学时就开始在这里买早点。"
        "去年王师傅的女儿从外地回来帮忙，她在店里加了咖啡和蛋糕，吸引了不少年轻人。"
        "王师傅笑着说，只要身体还行，他就会一直做下去。",
        "这一周本市几乎天天下雨，气象台连续三天发布暴雨黄色预警。"
        "城西几条道路出现积水，部分公交线路临时改道，早高峰时不少人上班迟到。"
        "学校提醒家长接送孩子时注意安全，有的幼儿园推迟了户外活动。"
        "农业部门说，这场雨对正在生长的水稻有好处，但低洼地区要及时排水。"
        "气象专家预计，雨水将持续到周末，下周一起天气逐渐转晴，气温也会回升。"
        "市民出门最好带上雨伞，开车的人要减速慢行。",
    ),
    "ja": (
        "市内を走る新しい路面電車が昨日開業しました。全長は十八キロで、駅は二十四か所あり、"
        "中央駅から大学のある丘の上までを結びます。朝と夕方のラッシュ時には六分おきに、"
        "それ以外の時間は十分おきに運行され、運賃はバスと同じです。"
        "初日には家族連れが大勢乗りに来て、車内はとてもにぎやかでした。"
        "病院に通う年配の女性は、これまでバスを二回乗り換えていたが、"
        "これからは三十分で行けると喜んでいました。沿線の商店街も客が増えることを期待しています。",
        "古い商店街の角にあるパン屋は、開店してから三十年になります。"
        "毎朝五時になると店の明かりがつき、焼きたてのパンの香りが通りに広がります。"
        "店主の山田さんは、パン作りで一番大切なのは生地をゆっくり発酵させることだと言います。"
        "人気のあんパンとメロンパンは、昼前に売り切れてしまうことも珍しくありません。"
        "去年からは娘さんが店を手伝い、コーヒーとケーキも出すようになって、"
        "若いお客さんが増えました。山田さんは、体が動くかぎり店を続けたいと笑っています。",
        "今週は毎日のように雨が降り、気象台は三日続けて大雨の注意報を出しました。"
        "市の西側では道路が冠水し、一部のバスが迂回したため、朝は多くの人が会社に遅れました。"
        "学校は保護者に送り迎えの際の安全に気をつけるよう呼びかけ、"
        "外での遊びを取りやめた幼稚園もありました。農家の人たちは、田んぼには恵みの雨だが、"
        "低い土地では水をはやく抜く必要があると話しています。雨は週末まで続き、"
        "来週からは晴れて気温も上がる見込みです。",
    ),
    "th": (
        "รถรางสายใหม่ของเมืองเปิดให้บริการอย่างเป็นทางการเมื่อวานนี้ เส้นทางยาวสิบแปดกิโลเมตร"
        "มีสถานีทั้งหมดยี่สิบสี่แห่ง เริ่มจากสถานีรถไฟไปจนถึงมหาวิทยาลัย"
        "ในช่วงเช้าและเย็นรถจะออกทุกหกนาที ส่วนเวลาอื่นออกทุกสิบนาที ค่าโดยสารเท่ากับรถเมล์"
        "วันแรกมีผู้คนพาลูกหลานมานั่งรถรางกันเป็นจำนวนมาก คุณครูที่เกษียณแล้วคนหนึ่งเล่าว่า"
        "เมื่อก่อนต้องต่อรถเมล์สองครั้งเพื่อไปโรงพยาบาล แต่ตอนนี้ใช้เวลาเพียงครึ่งชั่วโมง",
        "ร้านขนมปังตรงหัวมุมถนนสายเก่าเปิดมาแล้วสามสิบปี ทุกเช้าตอนตีห้าไฟในร้านก็สว่างขึ้น"
        "เจ้าของร้านบอกว่าสิ่งสำคัญที่สุดในการทำขนมปังคือความอดทน ต้องปล่อยให้แป้งขึ้นช้าๆ"
        "ขนมปังไส้ถั่วแดงและขนมปังสังขยาขายดีที่สุด มักจะหมดก่อนเที่ยงเสมอ"
        "ลูกค้าประจำบางคนมาซื้อที่นี่ตั้งแต่ยังเป็นนักเรียน เมื่อปีที่แล้วลูกสาวของเจ้าของร้าน"
        "กลับมาช่วยงาน และเพิ่มกาแฟกับเค้กเข้ามา ทำให้มีลูกค้าวัยรุ่นมากขึ้น",
        "สัปดาห์นี้ฝนตกแทบทุกวัน กรมอุตุนิยมวิทยาประกาศเตือนฝนตกหนักติดต่อกันสามวัน"
        "ถนนหลายสายทางฝั่งตะวันตกของเมืองมีน้ำท่วมขัง รถเมล์บางสายต้องเปลี่ยนเส้นทางชั่วคราว"
        "ทำให้หลายคนไปทำงานสาย โรงเรียนขอให้ผู้ปกครองระมัดระวังเมื่อมารับส่งเด็ก"
        "เกษตรกรบอกว่าฝนครั้งนี้เป็นผลดีต่อนาข้าว แต่พื้นที่ลุ่มต้องรีบระบายน้ำออก"
        "นักอุตุนิยมวิทยาคาดว่าฝนจะตกต่อไปจนถึงสุดสัปดาห์ แล้วอากาศจะค่อยๆ แจ่มใสขึ้น",
    ),
    "fr": (
        "La nouvelle ligne de tramway de la ville a été inaugurée hier matin. Longue de dix-huit "
        "kilomètres, elle compte vingt-quatre stations et relie la gare centrale au campus "
        "universitaire. Aux heures de pointe, une rame passe toutes les six minutes, et toutes "
        "les dix minutes le reste de la journée ; le ticket coûte le même prix que le bus. "
        "Dès le premier jour, de nombreuses familles sont venues l'essayer. Une enseignante "
        "retraitée explique qu'elle devait auparavant changer deux fois de bus pour aller à "
        "l'hôpital, alors qu'il lui suffit désormais d'une demi-heure.",
        "La boulangerie du coin de la vieille rue fête ses trente ans. Chaque matin, la lumière "
        "s'allume dans le fournil à cinq heures et l'odeur du pain chaud se répand dans le "
        "quartier. Le patron répète que le secret d'un bon pain, c'est la patience : une pâte "
        "doit lever lentement. Les croissants aux amandes et la fougasse aux olives partent "
        "souvent avant midi. L'an dernier, sa fille est revenue l'aider et a ajouté du café et "
        "des gâteaux, ce qui attire une clientèle plus jeune.",
        "Il a plu presque tous les jours cette semaine, et la météo a maintenu la vigilance "
        "orange pour fortes pluies pendant trois jours. Plusieurs rues de l'ouest de la ville "
        "ont été inondées, certaines lignes de bus ont été déviées et beaucoup d'habitants sont "
        "arrivés en retard au travail. Les agriculteurs estiment que cette pluie fera du bien "
        "aux cultures, mais les terrains bas doivent être drainés rapidement. Le beau temps "
        "devrait revenir lundi prochain, avec des températures en hausse.",
    ),
    "ru": (
        "Вчера в городе открылась новая трамвайная линия. Её длина восемнадцать километров, "
        "на ней двадцать четыре остановки, и она соединяет центральный вокзал с университетским "
        "городком. В часы пик трамваи ходят каждые шесть минут, в остальное время каждые десять, "
        "а проезд стоит столько же, сколько в автобусе. В первый день прокатиться пришли многие "
        "семьи с детьми. Пожилая учительница рассказала, что раньше ездила в больницу с двумя "
        "пересадками, а теперь добирается за полчаса.",
        "Пекарне на углу старой улицы исполнилось тридцать лет. Каждое утро в пять часов в ней "
        "зажигается свет, и запах свежего хлеба разносится по всему кварталу. Хозяин говорит, "
        "что главное в хорошем хлебе терпение: тесто должно подниматься медленно. Булочки с "
        "маком и пироги с капустой обычно заканчиваются ещё до обеда. В прошлом году ему стала "
        "помогать дочь, она добавила кофе и пирожные, и молодых покупателей стало больше.",
        "Всю эту неделю в городе почти каждый день шёл дождь, и синоптики три дня подряд "
        "объявляли штормовое предупреждение. На западе города затопило несколько улиц, часть "
        "автобусов пустили в объезд, и многие опоздали на работу. Фермеры говорят, что дождь "
        "полезен для посевов, но в низинах воду нужно быстро отводить. По прогнозу дожди "
        "продлятся до выходных, а со следующего понедельника станет теплее и суше.",
    ),
    "ar": (
        "افتتح أمس خط الترام الجديد في المدينة، ويبلغ طوله ثمانية عشر كيلومترا ويضم أربعا "
        "وعشرين محطة تربط المحطة المركزية بالحرم الجامعي. وفي ساعات الذروة يمر قطار كل ست "
        "دقائق، وفي باقي اليوم كل عشر دقائق، وسعر التذكرة هو نفسه سعر الحافلة. وفي اليوم "
        "الأول جاءت عائلات كثيرة مع أطفالها لتجربة الترام. وقالت معلمة متقاعدة إنها كانت تغير "
        "الحافلة مرتين للذهاب إلى المستشفى، أما الآن فتصل في نصف ساعة فقط.",
        "يحتفل المخبز الواقع على زاوية الشارع القديم بمرور ثلاثين عاما على افتتاحه. وفي كل "
        "صباح تضاء أنواره في الساعة الخامسة، وتنتشر رائحة الخبز الساخن في الحي كله. ويقول "
        "صاحب المخبز إن سر الخبز الجيد هو الصبر، فالعجين يجب أن يختمر ببطء. وغالبا ما تنفد "
        "الكعكات بالسمسم وفطائر الزعتر قبل الظهر. وفي العام الماضي عادت ابنته لمساعدته "
        "وأضافت القهوة والحلويات، فصار الشباب يأتون أكثر.",
        "هطلت الأمطار في المدينة كل يوم تقريبا هذا الأسبوع، وأصدرت الأرصاد الجوية تحذيرا "
        "من الأمطار الغزيرة ثلاثة أيام متتالية. وغمرت المياه عدة شوارع في غرب المدينة، "
        "وتغيرت مسارات بعض الحافلات، فتأخر كثير من الناس عن أعمالهم. ويقول المزارعون إن "
        "المطر مفيد للمحاصيل، لكن الأراضي المنخفضة تحتاج إلى تصريف المياه بسرعة. ومن "
        "المتوقع أن يتحسن الطقس مع بداية الأسبوع المقبل وترتفع درجات الحرارة.",
    ),
    "ko": (
        "시내를 달리는 새 노면전차가 어제 정식으로 개통했다. 전체 길이는 십팔 킬로미터이고 "
        "정류장은 스물네 곳이며 중앙역에서 대학가까지 이어진다. 출퇴근 시간에는 육 분마다, "
        "그 밖의 시간에는 십 분마다 다니고 요금은 버스와 같다. 개통 첫날에는 아이와 함께 "
        "타러 온 가족이 많아 차 안이 무척 붐볐다. 병원에 다니는 한 할머니는 예전에는 버스를 "
        "두 번 갈아타야 했는데 이제는 삼십 분이면 도착한다며 반가워했다.",
        "옛 골목 모퉁이에 있는 빵집이 문을 연 지 삼십 년이 되었다. 매일 새벽 다섯 시면 가게에 "
        "불이 켜지고 갓 구운 빵 냄새가 동네에 퍼진다. 주인은 좋은 빵을 만드는 비결은 반죽을 "
        "천천히 발효시키는 인내라고 말한다. 단팥빵과 소보로빵은 점심 전에 다 팔리는 날이 "
        "많다. 작년부터는 딸이 가게를 도우며 커피와 케이크를 내놓아 젊은 손님이 늘었다.",
        "이번 주에는 거의 매일 비가 내려 기상청이 사흘 연속 호우 주의보를 내렸다. 도시 서쪽의 "
        "여러 도로가 물에 잠기고 일부 버스가 우회하면서 많은 사람이 회사에 늦었다. 농민들은 "
        "이번 비가 벼에는 도움이 되지만 낮은 땅에서는 물을 빨리 빼야 한다고 말한다. 비는 "
        "주말까지 이어지고 다음 주부터는 날씨가 개면서 기온도 오를 것으로 보인다.",
    ),
}

#: Languages written without spaces between words.
NO_SPACES = frozenset({"zh", "ja", "th"})
# What ends a sentence in each language (appended once to make a near duplicate).
_FULL_STOP = {"zh": "。", "ja": "。", "th": "๚", "fr": ".", "ru": ".", "ar": ".", "ko": "."}


@dataclass(frozen=True)
class Pair:
    language: str
    kind: str
    a: str
    b: str


def _edit_chars(text: str, share: float, rng: random.Random) -> str:
    """Replace ``share`` of the letters of ``text`` with other letters of it."""
    chars = list(text)
    letters = [i for i, c in enumerate(chars) if c.isalpha()]
    alphabet = sorted({chars[i] for i in letters})
    for i in rng.sample(letters, max(1, round(share * len(chars)))):
        chars[i] = rng.choice([c for c in alphabet if c != chars[i]])
    return "".join(chars)


def _edit_words(text: str, share: float, rng: random.Random) -> str:
    """Replace ``share`` of the words of ``text`` with other words of it."""
    words = text.split(" ")
    vocabulary = sorted(set(words))
    for i in rng.sample(range(len(words)), max(1, round(share * len(words)))):
        words[i] = rng.choice([w for w in vocabulary if w != words[i]])
    return " ".join(words)


def near_pairs(seed: int = 12) -> list[Pair]:
    """Near duplicates of every text: one character changed, a sentence-ending
    mark appended, and about 2% of the characters (texts without spaces) or of
    the words (texts with spaces) replaced."""
    rng = random.Random(seed)
    pairs = []
    for language, texts in TEXTS.items():
        for text in texts:
            pairs.append(Pair(language, "one_char", text, _edit_chars(text, 0, rng)))
            pairs.append(Pair(language, "full_stop", text, text + _FULL_STOP[language]))
            edit = _edit_chars if language in NO_SPACES else _edit_words
            pairs.append(Pair(language, "edit_2pct", text, edit(text, 0.02, rng)))
    return pairs


def distinct_pairs() -> list[Pair]:
    """Every two different texts of one language (one topic each, shared vocabulary)."""
    return [
        Pair(language, "distinct", a, b)
        for language, texts in TEXTS.items()
        for a, b in combinations(texts, 2)
    ]
